"""What a user's own training loop reads from ``PipelineRuntime`` to log its loss on every rank:
``rt.loss_rank``, the global rank whose ``step`` returns the loss (docs/executor.md)."""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")

import ppir  # noqa: E402
from ppir.torch import PipelineRuntime  # noqa: E402

WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import torch
    import torch.distributed as dist

    import ppir
    from ppir.torch import PipelineRuntime, split_layers
    from ppir.torch.leave import leave

    ppir.torch.init(timeout_s=30)
    out = Path(sys.argv[-1]) / f"rank{dist.get_rank()}.txt"
    say = out.write_text  # no mesh: the pipeline is the world, rt.pp_group is None
    program = ppir.compile(ppir.load(sys.argv[1], P=2, M=2)).program
    torch.manual_seed(0)
    stages = split_layers([torch.nn.Linear(4, 4) for _ in range(4)], program.stages)
    rank = dist.get_rank()
    mine = [stages[s] for s in program.stages_of_rank[rank]]
    rt = PipelineRuntime(program, mine, torch.nn.functional.mse_loss)
    x, y = torch.ones(4, 4), torch.zeros(4, 4)
    loss = rt.step(x if rt.has_first_stage else None, y if rt.has_last_stage else None)
    # as docs/executor.md says, on every rank of the pipeline:
    t = loss.detach() if loss is not None else torch.zeros(())
    dist.broadcast(t, rt.loss_rank, group=rt.pp_group)
    say(f"rank {rank} returned {loss is not None} logs {t.item():.6f}")
    dist.barrier()
    leave(0)
    """
)


def said_by_ranks(folder) -> list[str]:
    """What each rank of a worker wrote to its own file (their stdout lines can interleave)."""
    return [p.read_text() for p in sorted(folder.glob("rank*.txt"))]


def test_loss_rank_of_one_process_is_its_own():
    plan = ppir.compile(ppir.load("1f1b", P=1, M=2)).program
    rt = PipelineRuntime(plan, [torch.nn.Linear(2, 2)], torch.nn.functional.mse_loss)
    assert rt.loss_rank == 0


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("schedule, holder", [("1f1b", 1), ("zbv", 0)])
def test_every_rank_logs_the_loss_of_the_rank_holding_the_last_stage(schedule, holder, tmp_path):
    """The docs had ``dist.get_global_rank(rt.pp_group, ...)``, which raises 'Group None is not
    registered' when the pipeline is the whole world (no mesh, or make_mesh with dp 1)."""
    from ppir.backends.cuda.launch import start

    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    res = start((str(script), schedule, str(tmp_path)), 2)
    assert res.ok, res.cause
    lines = said_by_ranks(tmp_path)
    assert len(lines) == 2, lines
    logged = {ln.split()[-1] for ln in lines}
    assert len(logged) == 1 and float(logged.pop()) > 0, lines  # the same loss everywhere
    assert f"rank {holder} returned True" in lines[holder], lines


MESH_WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import torch
    import torch.distributed as dist

    import ppir
    from ppir.torch import PipelineRuntime, make_mesh, split_layers
    from ppir.torch.leave import leave

    ppir.torch.init(timeout_s=30)
    out = Path(sys.argv[-1]) / f"rank{dist.get_rank()}.txt"
    program = ppir.compile(ppir.load("1f1b", P=2, M=2)).program
    mesh = make_mesh(2, 2)  # PP=2 x DP=2: rank = pp_rank * 2 + dp_rank
    torch.manual_seed(0)
    stages = split_layers([torch.nn.Linear(4, 4) for _ in range(4)], program.stages)
    mine = [stages[s] for s in program.stages_of_rank[mesh.pp_rank]]
    rt = PipelineRuntime(program, mine, torch.nn.functional.mse_loss, mesh=mesh)
    x = torch.ones(4, 4) * (1 + mesh.dp_rank)  # each replica its own batch, its own loss
    y = torch.zeros(4, 4)
    loss = rt.step(x if rt.has_first_stage else None, y if rt.has_last_stage else None)
    t = loss.detach() if loss is not None else torch.zeros(())
    dist.broadcast(t, rt.loss_rank, group=rt.pp_group)
    out.write_text(f"{dist.get_rank()} {mesh.dp_rank} {rt.loss_rank} {t.item():.6f}")
    dist.barrier()
    leave(0)
    """
)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_with_a_mesh_each_replica_logs_its_own_loss_from_its_last_stage(tmp_path):
    """``rt.loss_rank`` through a PP=2 x DP=2 mesh: the global rank of the replica's own last
    stage (ranks 2 and 3), so each pipeline group broadcasts its replica's loss (the two
    replicas' batches differ, and so do their losses)."""
    from ppir.backends.cuda.launch import start

    script = tmp_path / "worker.py"
    script.write_text(MESH_WORKER)
    res = start((str(script), str(tmp_path)), 4)
    assert res.ok, res.cause
    rows = [line.split() for line in said_by_ranks(tmp_path)]
    assert [r[:3] for r in rows] == [
        ["0", "0", "2"],
        ["1", "1", "3"],
        ["2", "0", "2"],
        ["3", "1", "3"],
    ], rows
    by_replica = {dp: {r[3] for r in rows if r[1] == dp} for dp in ("0", "1")}
    assert all(len(v) == 1 for v in by_replica.values()), rows  # one loss per replica
    assert by_replica["0"] != by_replica["1"], rows


def test_named_parameters_give_optimizer_groups_each_tied_weight_once():
    """Weight decay groups (no decay for norms and biases) are built from named parameters;
    iterating ``rt.stages`` gave the embedding tied to the head twice on a V placement, and
    AdamW stepped it twice per step (with only a UserWarning)."""
    import warnings

    from ppir.torch import split_layers

    torch.manual_seed(0)
    embed, head = torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10)
    head.weight = embed.weight
    stages = split_layers([torch.nn.LayerNorm(4)], 2, first=embed, last=head)
    plan = ppir.compile(ppir.load("zbv", P=1, M=2)).program  # both stages on this rank
    rt = PipelineRuntime(plan, stages, torch.nn.functional.mse_loss)
    named = rt.named_parameters()
    assert [n for n, _ in named] == [
        "stage0.first.weight",
        "stage0.layers.0.weight",
        "stage0.layers.0.bias",
        "stage1.last.bias",
    ]
    assert [p for _, p in named] == rt.parameters()
    decay = [p for _, p in named if p.ndim >= 2]
    rest = [p for _, p in named if p.ndim < 2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns of a parameter given twice
        torch.optim.AdamW([{"params": decay}, {"params": rest, "weight_decay": 0.0}])


ORDER_WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import torch
    import torch.distributed as dist

    import ppir
    from ppir.torch import CommError, PipelineRuntime, split_layers
    from ppir.torch.leave import leave

    ppir.torch.init(timeout_s=30)
    out = Path(sys.argv[-1]) / f"rank{dist.get_rank()}.txt"
    say = out.write_text
    program = ppir.compile(ppir.load("1f1b", P=2, M=2)).program
    torch.manual_seed(0)
    stages = split_layers([torch.nn.Linear(4, 4) for _ in range(2)], 2)
    rank = dist.get_rank()
    rt = PipelineRuntime(program, [stages[rank]], torch.nn.functional.mse_loss, timeout_s=3)
    x, y = torch.ones(4, 4), torch.zeros(4, 4)
    try:
        for _ in range(2 if rank == 0 else 1):  # rank 0 runs one step more
            rt.step(x if rt.has_first_stage else None, y if rt.has_last_stage else None)
        rt.clip_grad_norm_(1.0)
    except CommError as e:
        say(f"rank {rank} failed: {e}")
    leave(0)
    """
)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_clipping_while_a_peer_still_steps_says_every_rank_clips_after_the_same_steps(tmp_path):
    """Was 'rank 1: clip_grad_norm_: no answer from its peers within the 3 s timeout (is it
    stuck?)' alone, where the peer was not stuck but one step behind."""
    from ppir.backends.cuda.launch import start

    script = tmp_path / "worker.py"
    script.write_text(ORDER_WORKER)
    res = start((str(script), str(tmp_path)), 2)
    assert res.ok, res.cause
    out = said_by_ranks(tmp_path)
    line = next(ln for ln in out if ln.startswith("rank 1 failed: "))
    assert line.startswith(
        "rank 1 failed: rank 1: clip_grad_norm_: no answer from its peers within the 3 s "
        "timeout (is it stuck?): "
    ), out
    assert line.endswith(
        "; every rank of the pipeline calls clip_grad_norm_() together, after the same steps: "
        "a peer still in step() never answers"
    ), out


REPLICA_WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import torch
    import torch.distributed as dist

    import ppir
    from ppir.torch import PipelineRuntime, SetupError
    from ppir.torch.leave import leave

    ppir.torch.init(timeout_s=30)
    out = Path(sys.argv[-1]) / f"rank{dist.get_rank()}.txt"
    say = out.write_text
    mesh = ppir.torch.make_mesh(1, 2)  # PP=1 x DP=2
    program = ppir.compile(ppir.load("1f1b", P=1, M=2)).program
    torch.manual_seed(mesh.dp_rank)  # replicas built apart: construction makes them equal
    stage = torch.nn.Linear(4, 4)
    rt = PipelineRuntime(program, [stage], torch.nn.functional.mse_loss, mesh=mesh)
    if sys.argv[1] == "after" and mesh.dp_rank == 0:  # "the checkpoint", on replica 0 alone
        stage.load_state_dict({k: v + 1 for k, v in stage.state_dict().items()})
    try:
        rt.step(torch.ones(4, 4), torch.zeros(4, 4))
        say(f"rank {dist.get_rank()} stepped")
    except SetupError as e:
        say(f"rank {dist.get_rank()} refused: {e}")
    leave(0)
    """
)


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("load", ["none", "after"])
def test_parameters_loaded_after_construction_on_one_replica_are_refused(load, tmp_path):
    """A checkpoint loaded by data-parallel replica 0 alone after the runtime was built (DDP's
    habit, where the wrap comes after) trained the replicas apart with no error: the losses of
    a resumed PP=2 x DP=2 Llama run were not the uninterrupted run's."""
    from ppir.backends.cuda.launch import start

    script = tmp_path / "worker.py"
    script.write_text(REPLICA_WORKER)
    res = start((str(script), load, str(tmp_path)), 2)
    assert res.ok, res.cause
    lines = said_by_ranks(tmp_path)
    if load == "none":
        assert lines == ["rank 0 stepped", "rank 1 stepped"], lines
        return
    said = (
        ": the data-parallel replicas hold different parameters at the first step: the runtime "
        "gave every replica replica 0's when it was built, and they changed on some replicas "
        "since (a checkpoint loaded by replica 0 alone?); load it before building the runtime, "
        "or on every replica"
    )
    assert lines == [f"rank {r} refused: rank {r}{said}" for r in (0, 1)], lines
