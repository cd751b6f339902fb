"""The runtime in one process (no process group): plans whose stages all sit on one rank, so
every hand-off is local, plus the runtime's error messages.  Fast; needs torch."""

from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")

from ppir.backends.cuda import build_plan  # noqa: E402
from ppir.backends.cuda.executor import ShapeMismatch  # noqa: E402
from ppir.backends.cuda.model import (  # noqa: E402
    ModelError,
    build_stages,
    load_model,
    parse_options,
    split_batch,
)
from ppir.backends.cuda.plan import PlanError  # noqa: E402
from ppir.backends.cuda.reference import max_grad_diff, reference_grads  # noqa: E402
from ppir.backends.cuda.runtime import prepare  # noqa: E402

import ppir  # noqa: E402
from ppir.ir import Action, OpKind  # noqa: E402

CPU = torch.device("cpu")


def ctx(world: int = 1, rank: int = 0):
    return types.SimpleNamespace(rank=rank, world=world, device=CPU)


def model(width: int = 5, batch: int = 6):
    def build_stage(stage, num_stages):
        torch.manual_seed(stage)
        return torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh())

    def make_batch(step):
        g = torch.Generator().manual_seed(step)
        return torch.randn(batch, width, generator=g), torch.randn(batch, width, generator=g)

    return types.SimpleNamespace(
        build_stage=build_stage, make_batch=make_batch, loss_fn=lambda y, t: ((y - t) ** 2).mean()
    )


def split_iw(s):
    progs = []
    for r in range(s.ranks):
        out, ws = [], []
        for a in s.compute_actions(r):
            if a.kind is OpKind.B:
                out.append(Action(a.stage, OpKind.I, a.mb))
                ws.append(Action(a.stage, OpKind.W, a.mb))
            else:
                out.append(a)
        progs.append(tuple(out + ws))
    return s.replace_programs(tuple(progs))


@pytest.mark.parametrize("split", [False, True])
def test_local_hand_offs_match_the_reference(split):
    s = ppir.load_schedule("looped_bfs", {"P": 1, "M": 3, "v": 4})
    s = ppir.lower(split_iw(s) if split else s)
    m = model()
    ex = prepare(ctx(), build_plan(s), m)
    loss = ex.step(*split_batch(m, 0, 3, CPU, 0))
    ref_loss, ref = reference_grads(m, 4, 0, CPU)
    assert abs(loss.item() - ref_loss.item()) < 1e-6
    diff, _ = max_grad_diff(ex.modules, ex.stages, ref)
    assert diff < 1e-6
    assert ex.peak_saved == 12  # looped BFS keeps every (stage, microbatch) until its backward


def test_world_size_mismatch_is_named():
    plan = build_plan(ppir.lower(ppir.load_schedule("1f1b", {"P": 4, "M": 4})))
    with pytest.raises(
        PlanError,
        match=r"rank 1: the plan is for 4 ranks but the process "
        r"group has 2 \(WORLD_SIZE\)",
    ):
        prepare(ctx(world=2, rank=1), plan, model())


def test_plan_metadata_is_enforced():
    plan = build_plan(ppir.lower(ppir.load_schedule("looped_bfs", {"P": 1, "M": 2, "v": 2})))
    plan["meta"] = {
        "boundaries": {
            "0": {"shape": [3, 5], "dtype": "float32"},
            "1": {"shape": [3, 7], "dtype": "float32"},
        }
    }
    m = model()
    ex = prepare(ctx(), plan, m)
    with pytest.raises(
        ShapeMismatch,
        match=r"rank 0, instruction #0 \(0F0\): the output of "
        r"stage 0 has shape \(3, 5\) float32 but the plan's "
        r"metadata for boundary 1 says \(3, 7\) float32",
    ):
        ex.step(*split_batch(m, 0, 2, CPU, 0))


def test_factory_returning_the_wrong_thing():
    m = model()
    m.build_stage = lambda stage, n: [torch.nn.Linear(2, 2)]
    with pytest.raises(
        ModelError,
        match=r"rank 3: build_stage\(5, 8\) returned list, "
        r"expected a torch.nn.Module",
    ):
        build_stages(m, [5], 8, CPU, 3)


def test_batches_must_split_into_microbatches():
    with pytest.raises(
        ModelError,
        match=r"inputs have shape \(6, 5\): dim 0 must split into "
        r"4 equal microbatches",
    ):
        split_batch(model(), 0, 4, CPU, 0)
    m = model()
    m.make_batch = lambda step: torch.zeros(4)
    with pytest.raises(ModelError, match="must return \\(inputs, targets\\)"):
        split_batch(m, 0, 2, CPU, 0)


def test_loss_must_be_a_scalar():
    s = ppir.lower(ppir.load_schedule("gpipe", {"P": 1, "M": 2}))
    m = model()
    m.loss_fn = lambda y, t: (y - t) ** 2
    ex = prepare(ctx(), build_plan(s), m)
    with pytest.raises(ModelError, match=r"loss_fn on stage 0, microbatch 0 returned \(3, 5\)"):
        ex.step(*split_batch(m, 0, 2, CPU, 0))


def test_model_modules_are_checked(tmp_path):
    bad = tmp_path / "bad_model.py"
    bad.write_text("def build_stage(stage, n):\n    return None\n")
    with pytest.raises(ModelError, match="lacks make_batch, loss_fn"):
        load_model(str(bad))
    with pytest.raises(ModelError, match="does not exist"):
        load_model(str(tmp_path / "missing.py"))
    assert parse_options(["layers=4", "lr=0.5", "name=x"]) == {"layers": 4, "lr": 0.5, "name": "x"}


def test_gpt_example_trains_in_one_process():
    """The example's API on one rank: loss falls over a few optimizer steps."""
    from pathlib import Path

    from ppir.backends.cuda.model import make_optimizer

    gpt = load_model(str(Path(__file__).parent.parent / "examples" / "gpt_model.py"))
    old = dict(gpt.CONFIG)
    try:
        gpt.configure(layers=2, d_model=32, seq=8, batch=8, lr=1e-2)
        plan = build_plan(ppir.lower(ppir.load_schedule("1f1b", {"P": 1, "M": 2})))
        ex = prepare(ctx(), plan, gpt)
        opt = make_optimizer(gpt, [p for mod in ex.modules for p in mod.parameters()], 0.0)
        losses = []
        for step in range(15):
            opt.zero_grad()
            losses.append(ex.step(*split_batch(gpt, step, 2, CPU, 0)).item())
            opt.step()
        assert losses[-1] < losses[0] - 0.5, losses
    finally:
        gpt.CONFIG.clear()
        gpt.CONFIG.update(old)
