"""Multi-process test harness (not a test module): model factories, one case run inside a
process group, and the launch of a worker script under ppir's launcher.

A *case* is ``(schedule, parameters without P, model, transform)`` or, with data parallel and
optimizer steps, ``(schedule, parameters, model, transform, {"P": pp, "dp": dp, "steps": n})``.
For each case and each step, every rank compares the gradient of every parameter of its stages
(after the data-parallel and tied reductions), and the rank holding the last stage the loss,
with single-process training on the global batch; with ``steps`` and an optimizer (plain SGD)
it also compares the parameters after every step; with ``{"clip": c}`` both clip their
gradients to the global norm ``c`` (``PipelineRuntime.clip_grad_norm_`` against
``torch.nn.utils.clip_grad_norm_``) and the norms are compared too; with
``{"accumulate": True}`` the gradients are zeroed only before the first step, so they
accumulate over the steps (``rt.step`` called several times before one optimizer step), in
the reference too; with ``{"no_sync": True}`` as well, every step but the last runs inside
``rt.no_sync()`` and only the last is compared (and steps the optimizer); with
``{"zero_inside": True}`` too, the window starts after one synchronised step and, after its
first step, both the pipeline's and the reference's gradients are set to None
(``zero_grad()`` inside the window).  The largest differences are all-reduced and rank 0
writes them out, with the number of data-parallel reductions rank 0 posted.

Transforms: ``"iw"`` splits every B into I + W (W deferred by rank + 1 backward slots),
``"overlap"`` runs the overlap-comms pass, ``"eager"`` lowers with the eager strategy.
"""

from __future__ import annotations

import contextlib
import json
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOL = 1e-6  # fp32, relative to the largest gradient; observed ~1e-8 (summation order only)


def case_name(c) -> str:
    name, params, model, transform = c[:4]
    ps = ",".join(f"{k}={v}" for k, v in params.items())
    extra = c[4] if len(c) > 4 else {}
    lay = f"/dp{extra['dp']}" if extra.get("dp", 1) > 1 else ""
    lay += "/accumulate" if extra.get("accumulate") else ""
    lay += "/no_sync" if extra.get("no_sync") else ""
    lay += "/zero_inside" if extra.get("zero_inside") else ""
    lay += f"/clip{extra['clip']}" if extra.get("clip") else ""
    return f"{Path(name).stem}({ps})/{model}" + (f"/{transform}" if transform else "") + lay


# ---------------------------------------------------------------------- schedules
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


def program_of(name: str, params: dict, transform):
    import ppir
    from ppir.verify import verify

    s = ppir.load_schedule(name, params)
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
    assert verify(s).ok, f"{name} {params} {transform} does not verify"
    return s


# ---------------------------------------------------------------------- models
def mlp_model(batch: int):
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
        return torch.randn(batch, width[0], generator=g), torch.randn(batch, 64, generator=g)

    def loss_fn(y, t):
        return ((y - t[:, : y.shape[1]]) ** 2).mean()

    return types.SimpleNamespace(build_stage=build_stage, make_batch=make_batch, loss_fn=loss_fn)


def pair_model(batch: int):
    """Stages pass a dict {"x": float, "mask": int64}: several tensors per boundary."""
    import torch
    import torch.nn as nn

    class Stage(nn.Module):
        def __init__(self, stage, last):
            super().__init__()
            torch.manual_seed(2000 + stage)
            self.lin, self.last = nn.Linear(6, 6), last

        def forward(self, x, mask):
            y = torch.tanh(self.lin(x)) * (mask % 2 + 1)
            return y if self.last else {"x": y, "mask": mask + 1}

    def make_batch(step):
        g = torch.Generator().manual_seed(step)
        x = torch.randn(batch, 6, generator=g)
        mask = torch.randint(0, 5, (batch, 6), generator=g)
        return {"x": x, "mask": mask}, torch.randn(batch, 6, generator=g)

    return types.SimpleNamespace(
        build_stage=lambda s, n: Stage(s, s == n - 1),
        make_batch=make_batch,
        loss_fn=lambda y, t: ((y - t) ** 2).mean(),
    )


def tied_model(batch: int, vocab: int = 11, d: int = 8, layers: int = 4):
    """Embedding -> blocks -> head whose weight IS the embedding's (tied), cut with
    ppir.torch.split_layers from one model per process (cached)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    from ppir.torch import split_layers

    cache: dict = {}

    class Head(nn.Module):
        def __init__(self, emb):
            super().__init__()
            self.norm, self.out = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
            self.out.weight = emb.weight

        def forward(self, h):
            return self.out(self.norm(h))

    def stages(num_stages):
        if num_stages not in cache:
            torch.manual_seed(7)
            emb = nn.Embedding(vocab, d)
            blocks = [nn.Sequential(nn.Linear(d, d), nn.GELU()) for _ in range(layers)]
            cache[num_stages] = split_layers(blocks, num_stages, first=emb, last=Head(emb))
        return cache[num_stages]

    def make_batch(step):
        g = torch.Generator().manual_seed(step)
        ids = torch.randint(0, vocab, (batch, 5), generator=g)
        return ids, (ids + 1) % vocab

    def loss_fn(logits, t):
        return F.cross_entropy(logits.reshape(-1, vocab), t.reshape(-1))

    return types.SimpleNamespace(
        build_stage=lambda s, n: stages(n)[s], make_batch=make_batch, loss_fn=loss_fn
    )


def gpt_model():
    from ppir.torch.model import load_model

    m = load_model(str(ROOT / "examples" / "gpt_model.py"))
    m.configure(layers=3, d_model=16, heads=2, seq=8, batch=8, vocab=32)
    return m


def make_model(kind: str, batch: int):
    return (
        {"mlp": mlp_model, "pair": pair_model, "tied": tied_model}[kind](batch)
        if kind != "gpt"
        else gpt_model()
    )


# ---------------------------------------------------------------------- worker side
_MESHES: dict = {}


def run_case(ctx, world: int, case) -> dict:
    import torch
    import torch.distributed as dist

    from ppir.plan import build_plan
    from ppir.torch import PipelineRuntime
    from ppir.torch.model import PlainSGD, build_stages, split_batch
    from ppir.torch.procgroup import make_mesh
    from ppir.torch.reference import (
        max_grad_diff,
        max_param_diff,
        reference_modules,
        reference_step,
        stage_grads,
        unique_parameters,
    )

    name, params, model_kind, transform = case[:4]
    extra = case[4] if len(case) > 4 else {}
    P, dp, steps = extra.get("P", world), extra.get("dp", 1), extra.get("steps", 2)
    if (P, dp) not in _MESHES:
        _MESHES[(P, dp)] = make_mesh(P, dp)
    mesh = _MESHES[(P, dp)]
    s = program_of(name, {"P": P, **params}, transform)
    plan = build_plan(s)
    M = s.microbatches
    model = make_model(model_kind, 2 * M * dp)
    ref = reference_modules(model, s.stages, ctx.device)
    mods = build_stages(model, plan["stages_of_rank"][mesh.pp_rank], s.stages, ctx.device, ctx.rank)
    rt = PipelineRuntime(plan, mods, model.loss_fn, mesh=mesh, timeout_s=30)
    train, accumulate = "steps" in extra, extra.get("accumulate", False)
    no_sync, reductions = extra.get("no_sync", False), [0]
    post = rt.reducer.post

    def counted_post(chunk):
        before = len(rt.reducer.pending)
        post(chunk)
        reductions[0] += len(rt.reducer.pending) - before

    rt.reducer.post = counted_post
    opt = PlainSGD(rt.parameters(), 0.1) if train else None
    ref_opt = PlainSGD(unique_parameters(ref), 0.1) if train else None
    worst = torch.tensor([0.0, 0.0, 0.0, -float("inf"), 0.0], dtype=torch.float64)
    for step in range(steps):
        for p in rt.parameters() + unique_parameters(ref) if not (step and accumulate) else ():
            p.grad = None
        xs, ys = split_batch(
            model, step, M, ctx.device, ctx.rank, replicas=dp, replica=mesh.dp_rank
        )
        zero_inside = extra.get("zero_inside", False)
        local = no_sync and int(zero_inside) <= step < steps - 1
        with rt.no_sync() if local else contextlib.nullcontext():
            loss = rt.step_microbatches(
                xs if rt.has_first_stage else None, ys if rt.has_last_stage else None
            )
        if loss is not None and dp > 1:
            dist.all_reduce(loss, group=mesh.dp_group)
            loss /= dp
        ref_loss = reference_step(ref, model, step, ctx.device)
        if local and zero_inside and step == 1:  # discards all accumulated: DDP's semantics
            for p in rt.parameters() + unique_parameters(ref):
                p.grad = None
        if local:  # this replica's own gradients: compared after the window's last step
            continue
        if extra.get("clip"):  # the pipeline's global norm, each parameter once, and its clip
            norm = float(rt.clip_grad_norm_(extra["clip"]))
            ref_norm = float(torch.nn.utils.clip_grad_norm_(unique_parameters(ref), extra["clip"]))
            assert ref_norm > extra["clip"], "the case must clip"
            clip_diff = abs(norm - ref_norm) / ref_norm
        rg = stage_grads(ref)
        gdiff, _ = max_grad_diff(rt.stages, rt.stage_ids, rg)
        ldiff = abs(loss.item() - ref_loss.item()) if loss is not None else 0.0
        if extra.get("clip"):  # the norm's relative difference, checked with the loss's
            ldiff = max(ldiff, clip_diff)
        pdiff = 0.0
        if train:
            opt.step()
            ref_opt.step()
            pdiff = max_param_diff(rt.stages, rt.stage_ids, ref)[0]
        gs = [g.abs().max().item() for st in rt.stage_ids for g in rg[st].values()]
        vals = [gdiff, ldiff, pdiff, -max(gs), max(gs)]
        worst = torch.maximum(worst, torch.tensor(vals, dtype=torch.float64))
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    peaks = [None] * world
    dist.all_gather_object(peaks, rt.peak_saved)
    return {
        "case": case_name(case),
        "grad_diff": worst[0].item(),
        "loss_diff": worst[1].item(),
        "param_diff": worst[2].item(),
        "min_stage_grad_max": -worst[3].item(),
        "grad_max": worst[4].item(),
        "peaks": peaks,
        "tied": sum(len(t.local) for t in rt.reducer.tied),
        "reductions": reductions[0],
    }


def run_cases(world: int, out: str, make_cases) -> None:
    """Worker body: run every case of ``make_cases()`` in one process group; rank 0 writes the
    results to ``out``.  Any failure ends every rank with its message."""
    from ppir.torch import failures, procgroup

    ctx = procgroup.init(device="cpu", timeout_s=30)
    ctx.channel = failures.FailureChannel.connect(ctx.rank, 30)
    ctx.channel.start_watchdog()
    try:
        results = [run_case(ctx, world, c) for c in make_cases()]
    except BaseException as e:  # noqa: BLE001 - end every rank with this message
        failures.fail(ctx, ctx.rank, e)
    if ctx.rank == 0:
        Path(out).write_text(json.dumps(results))
    assert ctx.channel.stop(), "the failure watchdog is still inside a store call"
    import torch.distributed as dist

    dist.barrier()
    from ppir.torch.leave import leave

    leave(0)  # not finalising: a gloo worker can abort it (ppir.torch.leave)


def launch_cases(script: str, world: int, tmp_path, *args: str) -> list[dict]:
    """Launch ``script world out ARGS`` on ``world`` ranks; the per-case results, each checked
    for equality with single-process training."""
    from ppir.backends.cuda.launch import start

    out = tmp_path / "results.json"
    res = start(("-u", script, str(world), str(out), *args), world)
    assert res.ok, f"ranks failed: {res.cause}"
    results = json.loads(out.read_text())
    for r in results:
        scale = max(1.0, r["grad_max"])  # fp32 round-off grows with the gradients' size
        assert r["grad_diff"] <= TOL * scale, r
        assert r["loss_diff"] <= TOL, r
        assert r["param_diff"] <= TOL, r
        assert r["min_stage_grad_max"] > 1e-4, f"a stage got no gradient signal: {r}"
    return results


if __name__ == "__main__":
    sys.exit("this is a helper module; run the tests")
