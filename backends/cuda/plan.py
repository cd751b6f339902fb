"""The per-rank execution plan (``ppir.plan/1``): plain JSON data, built without torch.

A plan is the lowered schedule rewritten as instructions a runtime can interpret without any
scheduling decision of its own.  Contract:

* ``programs[r]`` is rank ``r``'s instruction list, in the order the IR gives.  Every compute
  action becomes one compute instruction; every communication item (a :class:`ppir.ir.Group`, or
  a lone SEND/RECV, which is a group of one) becomes one ``group`` instruction whose ``ops`` keep
  the IR's posting order.  Nothing is merged, split or reordered.
* Values crossing the boundary between stage ``b-1`` and stage ``b`` for microbatch ``m`` live in
  buffers named ``a{b}.{m}`` (the activation, input of stage ``b``) and ``g{b}.{m}`` (its
  gradient).  The sender and the receiver name the same buffer.  Each buffer is written once and
  read once, so the runtime frees it at its single read.
* Compute instructions say where their inputs come from and where their outputs go:
  ``in``/``out`` for F (``"data"`` = the microbatch, ``"loss"`` = the loss function),
  ``grad_in``/``grad_out`` for B and I (``null`` = none).  ``local: true`` marks an output that
  stays on this rank (a V-placement fold), so no communication carries it.
* ``meta`` holds shape/dtype metadata per boundary: ``null`` in a compiled plan; the runtime
  fills it by shape inference when it starts.
"""

from __future__ import annotations

import json
from pathlib import Path

from ppir.diagnostics import write_output
from ppir.ir import Action, Group, OpKind, Schedule, Wait, deps, is_compute_item, item_actions
from ppir.ir.printer import schedule_header

PLAN_FORMAT = "ppir.plan/1"


class PlanError(ValueError):
    """A plan that cannot be executed (malformed, or reading a buffer nothing provides)."""


def boundary_of(buffer: str) -> int:
    """The stage boundary a buffer id crosses (``a3.1`` -> 3)."""
    return int(buffer[1:].split(".")[0])


def _compute(s: Schedule, a: Action, chunk: int) -> dict:
    S, place = s.stages, s.placement
    ins = {"op": a.kind.value, "stage": a.stage, "mb": a.mb, "chunk": chunk, "ir": str(a)}
    msg_in, msg_out = deps.message_in(a, S), deps.message_out(a, S)
    if a.kind is OpKind.F:
        ins["in"] = "data" if msg_in is None else msg_in.buffer
        ins["out"] = "loss" if msg_out is None else msg_out.buffer
        ins["local"] = msg_out is not None and not deps.crosses_ranks(place, msg_out)
    elif a.kind.is_backward:
        ins["grad_in"] = None if msg_in is None else msg_in.buffer
        ins["grad_out"] = None if msg_out is None else msg_out.buffer
        ins["local"] = msg_out is not None and not deps.crosses_ranks(place, msg_out)
    return ins


def _comm(s: Schedule, a: Action) -> dict:
    msg = deps.message_of(a)
    return {
        "op": "send" if a.kind.is_send else "recv",
        "kind": "grad" if msg.grad else "act",
        "peer": deps.peer_rank(s.placement, a),
        "stage": a.stage,
        "mb": a.mb,
        "buffer": msg.buffer,
        "ir": str(a),
    }


def build_plan(schedule: Schedule) -> dict:
    """The ``ppir.plan/1`` object for a lowered schedule (see the module docstring).

    Raises :class:`PlanError` when the schedule is not lowered or the plan reads a buffer before
    anything provides it (see :func:`check_plan`).
    """
    s = schedule
    if s.pipelines > 1:
        raise PlanError(
            f"{s.name} runs {s.pipelines} pipelines (replicas of one model); the executor runs "
            "one pipeline of distinct stages, so it cannot run it yet"
        )
    if not s.is_lowered and deps.has_boundaries_across_ranks(s.placement):
        raise PlanError("the schedule has no communication: lower it first (ppir.lower)")
    programs = []
    for r, prog in enumerate(s.programs):
        chunk = {st: c for c, st in enumerate(s.stages_of_rank[r])}
        out = []
        posted: dict[tuple, dict] = {}  # deferred groups of this rank by their actions
        for it in prog:
            if isinstance(it, Wait):
                g = posted.pop(it.actions, None)
                if g is None:
                    raise PlanError(f"rank {r}: {it} waits for no deferred group posted before")
                out.append(
                    {
                        "op": "wait",
                        "group": g["id"],
                        "ir": str(it),
                        "recv": [o["buffer"] for o in g["ops"] if o["op"] == "recv"],
                    }
                )
            elif not is_compute_item(it):
                ins = {"op": "group", "ops": [_comm(s, a) for a in item_actions(it)], "ir": str(it)}
                if isinstance(it, Group) and it.deferred:
                    ins["deferred"] = True
                    ins["id"] = len(out)
                    posted[it.actions] = ins
                out.append(ins)
            else:  # an overlapped step (ppir.ir.Overlap) runs its parts in order
                out.extend(_compute(s, a, chunk[a.stage]) for a in item_actions(it))
        if posted:
            raise PlanError(
                f"rank {r}: {len(posted)} deferred group(s) never waited on, e.g. "
                f"{next(iter(posted.values()))['ir']}"
            )
        programs.append(out)
    plan = {
        "format": PLAN_FORMAT,
        **schedule_header(s),
        "stages_of_rank": [list(x) for x in s.stages_of_rank],
        "split_backward": s.uses_split_backward(),
        "meta": None,
        "programs": programs,
    }
    check_plan(plan)
    return plan


def _reads_writes(ins: dict) -> tuple[list[str], list[str]]:
    """Buffers an instruction reads and writes (local hand-offs and received values)."""
    op = ins["op"]
    if op == "group":  # a deferred group's received values exist only after its wait
        return (
            [o["buffer"] for o in ins["ops"] if o["op"] == "send"],
            [] if ins.get("deferred") else [o["buffer"] for o in ins["ops"] if o["op"] == "recv"],
        )
    if op == "wait":
        return [], list(ins["recv"])
    if op == "F":
        reads = [] if ins["in"] == "data" else [ins["in"]]
        return reads, ([] if ins["out"] == "loss" else [ins["out"]])
    if op in ("B", "I"):
        reads = [ins["grad_in"]] if ins["grad_in"] else []
        return reads, ([ins["grad_out"]] if ins["grad_out"] else [])
    return [], []


def check_plan(plan: dict) -> None:
    """Structural checks: format, one program per rank, and on each rank every buffer is
    provided (by a recv or a local compute output) before it is read.  PlanError otherwise."""
    if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
        got = plan.get("format") if isinstance(plan, dict) else type(plan).__name__
        raise PlanError(f"not a {PLAN_FORMAT} plan (format = {got!r})")
    for key in ("ranks", "stages", "microbatches", "placement", "programs", "stages_of_rank"):
        if key not in plan:
            raise PlanError(f"plan lacks the field {key!r}")
    if len(plan["programs"]) != plan["ranks"] or len(plan["placement"]) != plan["stages"]:
        raise PlanError(
            f"plan has {len(plan['programs'])} programs and "
            f"{len(plan['placement'])} placements for {plan['ranks']} ranks and "
            f"{plan['stages']} stages"
        )
    for r, prog in enumerate(plan["programs"]):
        have: set[str] = set()
        for i, ins in enumerate(prog):
            reads, writes = _reads_writes(ins)
            for b in reads:
                if b not in have:
                    raise PlanError(
                        f"rank {r}, instruction #{i} ({ins.get('ir', ins['op'])}) "
                        f"reads buffer {b} before anything on rank {r} provides it"
                    )
                have.discard(b)
            have.update(writes)


def plan_summary(plan: dict) -> str:
    n = sum(len(p) for p in plan["programs"])
    return (
        f"{plan['schedule']}: {plan['ranks']} ranks, {plan['stages']} stages, "
        f"{plan['microbatches']} microbatches, {n} instructions"
    )


def save_plan(plan: dict, path: str | Path, indent: int | None = 1) -> None:
    """Write the plan; a ``bad-output`` error naming ``path`` when that fails."""
    write_output(str(path), json.dumps(plan, indent=indent) + "\n")


def load_plan(path: str | Path) -> dict:
    """Read and check a plan file; PlanError with the path on anything unusable."""
    try:
        plan = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise PlanError(f"{path}: cannot read plan: {e}") from None
    try:
        check_plan(plan)
    except PlanError as e:
        raise PlanError(f"{path}: {e}") from None
    return plan
