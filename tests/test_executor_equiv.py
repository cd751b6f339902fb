"""Numerical equivalence of ppir's runtime with single-process training (multi-process gloo).

One launch per world size runs every case inside one process group (a launch costs seconds of
start-up).  For each case and for two steps, every rank compares the gradient of every parameter
of its stages, and the rank holding the last stage the loss, with a single-process reference on
the same model and data; the largest differences are all-reduced and rank 0 writes them out.
The test also checks the runtime's peak of in-flight activations against the schedule's
textbook memory (GPipe: M on every rank; 1F1B: min(P - r, M) on rank r).
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOL = 1e-6  # fp32; the observed differences are ~1e-8 (summation order only)

# (schedule, parameters without P, model, transform); transform "iw" splits every B into I + W,
# "overlap" runs the overlap-comms pass (deferred groups: post early, wait late), "eager"
# lowers with the eager strategy (exchanges planned with transfers of 1/4 of a forward) first
CASES = {
    2: [
        ("gpipe", {"M": 3}, "mlp", None),
        ("1f1b", {"M": 2}, "mlp", None),
        ("1f1b", {"M": 5}, "mlp", None),
        ("interleaved_1f1b", {"M": 2, "v": 2}, "mlp", None),
        ("interleaved_1f1b", {"M": 4, "v": 3}, "mlp", None),
        ("interleaved_vshape", {"M": 2, "v": 2}, "mlp", None),
        ("interleaved_vshape", {"M": 4, "v": 4}, "mlp", None),
        ("looped_bfs", {"M": 3, "v": 2}, "mlp", None),
        ("looped_bfs", {"M": 2, "v": 3}, "mlp", None),
        ("1f1b", {"M": 4}, "gpt", None),
        ("interleaved_vshape", {"M": 4, "v": 2}, "mlp", "iw"),
        ("1f1b", {"M": 4}, "mlp", "overlap"),
        ("interleaved_1f1b", {"M": 4, "v": 2}, "mlp", "overlap"),
        ("1f1b", {"M": 5}, "mlp", "eager"),
    ],
    4: [
        ("gpipe", {"M": 4}, "mlp", None),
        ("gpipe", {"M": 5}, "mlp", None),
        ("1f1b", {"M": 1}, "mlp", None),
        ("1f1b", {"M": 4}, "mlp", None),
        ("1f1b", {"M": 7}, "mlp", None),
        ("interleaved_1f1b", {"M": 4, "v": 2}, "mlp", None),
        ("interleaved_1f1b", {"M": 8, "v": 2}, "mlp", None),
        ("interleaved_1f1b", {"M": 4, "v": 3}, "mlp", None),
        ("interleaved_vshape", {"M": 4, "v": 2}, "mlp", None),
        ("interleaved_vshape", {"M": 8, "v": 4}, "mlp", None),
        ("looped_bfs", {"M": 3, "v": 2}, "mlp", None),
        ("looped_bfs", {"M": 4, "v": 1}, "mlp", None),
        ("interleaved_1f1b", {"M": 4, "v": 2}, "gpt", None),
        ("1f1b", {"M": 4}, "mlp", "iw"),
        ("1f1b", {"M": 7}, "mlp", "overlap"),
        ("interleaved_vshape", {"M": 4, "v": 2}, "mlp", "overlap"),
        ("interleaved_1f1b", {"M": 8, "v": 2}, "gpt", "overlap"),
        ("1f1b", {"M": 6}, "mlp", "eager"),
        ("interleaved_1f1b", {"M": 8, "v": 2}, "mlp", "eager"),
    ],
}


def case_name(c) -> str:
    name, params, model, transform = c
    ps = ",".join(f"{k}={v}" for k, v in params.items())
    return f"{name}({ps})/{model}" + (f"/{transform}" if transform else "")


# ---------------------------------------------------------------------- worker side
def split_backward(s):
    """Every B becomes I; rank r's W of a microbatch runs r + 1 backward slots later (a
    zero-bubble-like deferral), the rest at the end of the program."""
    from ppir.ir import Action, OpKind

    progs = []
    for r in range(s.ranks):
        out, pending = [], []
        for a in s.compute_actions(r):
            if a.kind is OpKind.B:
                out.append(Action(a.stage, OpKind.I, a.mb))
                pending.append(Action(a.stage, OpKind.W, a.mb))
                if len(pending) > r + 1:
                    out.append(pending.pop(0))
            else:
                out.append(a)
        progs.append(tuple(out + pending))
    return s.replace_programs(tuple(progs))


def mlp_model(M: int):
    """Linear+tanh stages whose widths differ at every boundary (exercises the metadata)."""
    import torch
    import torch.nn as nn

    width = [3 + (7 * b) % 6 for b in range(64)]

    def build_stage(stage, num_stages):
        torch.manual_seed(1000 + stage)
        lin = nn.Linear(width[stage], width[stage + 1])
        return lin if stage == num_stages - 1 else nn.Sequential(lin, nn.Tanh())

    def make_batch(step):
        g = torch.Generator().manual_seed(step)
        return torch.randn(2 * M, width[0], generator=g), torch.randn(2 * M, 64, generator=g)

    def loss_fn(y, t):
        return ((y - t[:, : y.shape[1]]) ** 2).mean()

    return types.SimpleNamespace(build_stage=build_stage, make_batch=make_batch, loss_fn=loss_fn)


def gpt_model():
    from ppir.backends.cuda.model import load_model

    m = load_model(str(ROOT / "examples" / "gpt_model.py"))
    m.configure(layers=3, d_model=16, heads=2, seq=8, batch=8, vocab=32)
    return m


def run_case(ctx, P: int, case):
    import torch
    import torch.distributed as dist
    from ppir.backends.cuda import build_plan, runtime
    from ppir.backends.cuda.model import split_batch
    from ppir.backends.cuda.reference import max_grad_diff, reference_grads

    import ppir
    from ppir.verify import verify

    name, params, model_kind, transform = case
    s = ppir.load_schedule(name, {"P": P, **params})
    if transform == "iw":
        s = split_backward(s)
    if transform == "eager":
        from ppir.analysis.costs import Costs
        from ppir.ir import OpKind

        op = {OpKind.F: 4, OpKind.B: 8, OpKind.I: 4, OpKind.W: 4}
        costs = Costs(tuple(dict(op) for _ in range(s.stages)), intra=1, inter=1)
        s = ppir.passes.LowerComms("eager", costs=costs).apply(s)
    else:
        s = ppir.lower(s)
    if transform in ("overlap", "eager"):
        from ppir.passes import OverlapComms

        s = OverlapComms().apply(s)
    assert verify(s).ok, f"{case_name(case)} does not verify"
    plan = build_plan(s)
    model = mlp_model(s.microbatches) if model_kind == "mlp" else gpt_model()
    ex = runtime.prepare(ctx, plan, model)
    worst = torch.tensor([0.0, 0.0, -float("inf")], dtype=torch.float64)
    for step in (0, 1):
        for m in ex.modules:
            for p in m.parameters():
                p.grad = None
        loss = ex.step(*split_batch(model, step, s.microbatches, ctx.device, ctx.rank))
        ref_loss, ref = reference_grads(model, s.stages, step, ctx.device)
        gdiff, _ = max_grad_diff(ex.modules, ex.stages, ref)
        ldiff = abs(loss.item() - ref_loss.item()) if loss is not None else 0.0
        gmax = max(g.abs().max().item() for st in ex.stages for g in ref[st].values())
        worst = torch.maximum(worst, torch.tensor([gdiff, ldiff, -gmax], dtype=torch.float64))
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    peaks = [None] * P
    dist.all_gather_object(peaks, ex.peak_saved)
    return {
        "case": case_name(case),
        "grad_diff": worst[0].item(),
        "loss_diff": worst[1].item(),
        "min_stage_grad_max": -worst[2].item(),
        "peaks": peaks,
    }


def run_cases(P: int, out: str, make_cases) -> None:
    """Worker body: run every case of ``make_cases()`` in one process group; rank 0 writes the
    results to ``out``.  Any failure ends every rank with its message."""
    from ppir.backends.cuda import procgroup

    ctx = procgroup.init(device="cpu", timeout_s=30)
    ctx.channel.start_watchdog()
    try:
        results = [run_case(ctx, P, c) for c in make_cases()]
    except BaseException as e:  # noqa: BLE001 - end every rank with this message
        procgroup.fail(ctx, ctx.rank, f"{type(e).__name__}: {e}")
    if ctx.rank == 0:
        Path(out).write_text(json.dumps(results))
    ctx.channel.stop()
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()


def worker(P: int, out: str) -> None:
    run_cases(P, out, lambda: CASES[P])


def launch_cases(script: str, P: int, tmp_path, deadline_s: float) -> list[dict]:
    """Launch ``script P out`` on P ranks; the per-case results, each checked for equality."""
    from ppir.backends.cuda.launcher import launch

    out = tmp_path / "results.json"
    res = launch([sys.executable, script, str(P), str(out)], P, deadline_s=deadline_s)
    assert res.ok, f"ranks failed: {res.codes}: {res.first_failure}"
    results = json.loads(out.read_text())
    for r in results:
        assert r["grad_diff"] <= TOL, r
        assert r["loss_diff"] <= TOL, r
        assert r["min_stage_grad_max"] > 1e-4, f"a stage got no gradient signal: {r}"
    return results


# ---------------------------------------------------------------------- pytest side
@pytest.mark.slow
@pytest.mark.timeout(200)
@pytest.mark.parametrize("P", [2, 4])
def test_pipelined_grads_equal_single_process(P, tmp_path):
    results = launch_cases(__file__, P, tmp_path, deadline_s=180)
    assert [r["case"] for r in results] == [case_name(c) for c in CASES[P]]
    for r in results:
        name, params = r["case"].split("(")[0], CASES[P][results.index(r)][1]
        M = params["M"]
        if name == "gpipe":
            assert r["peaks"] == [M] * P, r
        if name == "1f1b" and "/iw" not in r["case"]:
            assert r["peaks"] == [min(P - k, M) for k in range(P)], r


if __name__ == "__main__":
    worker(int(sys.argv[1]), sys.argv[2])
