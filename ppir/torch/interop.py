"""ppir's verified program on torch.distributed.pipelining's own runtime, without a CSV file.

:func:`to_torch_schedule` returns a ``_PipelineScheduleRuntime`` loaded with the lowered,
verified program in torch's ``compute_comms`` form: every group flattened in an order both ends
agree on (:func:`ppir.frontend.csvio.flatten_groups`), and ``REDUCE_GRAD`` after each stage's
last backward (:mod:`ppir.ir.reduce`; without it torch leaves the gradients M times too large).
This is what ``ppir compile --backend torch-csv --csv-format compute_comms`` writes to a file;
the torch API used (``_PipelineScheduleRuntime``, ``_prepare_schedule_with_comms``,
``_Action``) is private and may change between torch releases (tested with torch 2.13).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ppir.diagnostics import count
from ppir.frontend.csvio import flatten_groups, torch_rows


def lowered_program(program):
    """The lowered, verified Schedule of a compiled object (``.program``), a plan or a
    Schedule: a compile that failed, or a Schedule that does not verify (a deadlock, or a
    compute order a compile stopped at, such as torch:1F1B's), is refused with the verifier's
    ``PpirError`` (exit status 1), as a plan is, not run."""
    from ppir.diagnostics import EXIT_INVALID, PpirError
    from ppir.ir import Schedule
    from ppir.plan import plan_schedule, validate_plan
    from ppir.verify import verify

    given = program
    if hasattr(program, "program") and not isinstance(program, dict):
        if callable(getattr(program, "check", None)):
            program.check()  # a Compiled: its own verdict
        program = program.program
    if isinstance(program, dict):
        validate_plan(program)  # verifies it
        program = plan_schedule(program)
    if not isinstance(program, Schedule):
        raise TypeError(f"expected a compiled program, a plan or a Schedule, got {program!r}")
    if not program.is_lowered and program.ranks > 1:
        report = verify(program)  # a compile that stopped at its input: say why
        if not report.ok:
            raise PpirError(report.errors, EXIT_INVALID)
        raise ValueError("the schedule has no communication: compile (or lower) it first")
    if given is program:  # a Schedule of the caller's: nothing has verified it yet
        report = verify(program)
        if not report.ok:
            raise PpirError(report.errors, EXIT_INVALID)
    return program


def to_torch_schedule(
    program,
    stages,
    n_microbatches: int | None = None,
    loss_fn=None,
    *,
    group=None,
    device=None,
    scale_grads: bool = True,
):
    """torch's runtime schedule for this rank, running ppir's ``program``.

    ``stages`` are this rank's ``PipelineStage`` objects, or its stage modules (wrapped in
    ``PipelineStage`` with the plan's stage indices, in ascending order).  ``n_microbatches``
    defaults to the program's and must equal it.  Call ``schedule.step(...)`` as with any torch
    schedule."""
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import _Action, _PipelineScheduleRuntime

    s = lowered_program(program)
    if s.forward_only:
        raise ValueError(
            f"{s.name} is an evaluation program (forward_only): give torch the training "
            "program; its schedule's eval(...) runs the forwards only"
        )
    M = s.microbatches if n_microbatches is None else n_microbatches
    if M != s.microbatches:
        raise ValueError(f"the program runs {count(s.microbatches, 'microbatch')}, not {M}")
    rank, world = (
        (dist.get_rank(group), dist.get_world_size(group)) if dist.is_initialized() else (0, 1)
    )
    if world != s.ranks:  # else a rank past the program's has no stages (IndexError), or torch
        raise ValueError(  # asserts 'Schedule has incorrect number of ranks'
            f"{s.name} runs on {count(s.ranks, 'rank')}, but the process group has {world}"
            + ("" if dist.is_initialized() else " (torch.distributed is not initialised)")
        )
    mine = list(s.stages_of_rank[rank])
    stages = list(stages)
    if len(stages) != len(mine):
        raise ValueError(f"rank {rank} holds stages {mine}; {len(stages)} given")
    wrapped = []
    for idx, st in zip(mine, stages):
        if isinstance(st, torch.nn.Module):
            dev = device or next((p.device for p in st.parameters()), torch.device("cpu"))
            st = PipelineStage(st, stage_index=idx, num_stages=s.stages, device=dev, group=group)
        elif st.stage_index != idx:
            raise ValueError(f"rank {rank}'s stage {st.stage_index} is not one of {mine}")
        wrapped.append(st)
    rows = torch_rows(flatten_groups(s), compute_only=False, reduce_grad=True)
    actions = {r: [_Action.from_str(c) for c in row] for r, row in enumerate(rows)}
    sched = _PipelineScheduleRuntime(
        wrapped, n_microbatches=M, loss_fn=loss_fn, scale_grads=scale_grads
    )
    sched._prepare_schedule_with_comms(actions, format="compute_comms")
    return sched
