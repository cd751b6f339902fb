"""Build the per-rank execution plan (``ppir.plan/2``) from a lowered schedule, without torch.

A plan is the lowered schedule rewritten as instructions a runtime interprets without any
scheduling decision of its own.  Contract:

* ``programs[r]`` is rank ``r``'s instruction list in IR order.  A compute action becomes one
  compute instruction; an overlapped step (:class:`ppir.ir.Overlap`) becomes its two parts,
  marked ``"overlap": 0`` and ``1``; every communication item (a :class:`ppir.ir.Group`, or a
  lone SEND/RECV, a group of one) becomes one ``group`` instruction whose ``ops`` keep the IR's
  posting order; a :class:`ppir.ir.Wait` becomes a ``wait``.  ``ir`` is the IR item's text.
* Each :class:`ppir.ir.Reduce` (``sREDUCE_GRAD``) becomes a ``reduce`` instruction; a program
  that places none gets one after each stage's last backward (B or W,
  :func:`ppir.ir.reduce.place_reduces`).  The runtime posts there the reduction of the stage's
  gradients across data-parallel replicas, asynchronously, and waits for it at the end of the
  step.  With one replica it does nothing.
* Values crossing the boundary between stage ``b-1`` and stage ``b`` for microbatch ``m`` live
  in buffers ``a{b}.{m}`` (the activation, input of stage ``b``) and ``g{b}.{m}`` (its
  gradient).  Sender and receiver name the same buffer; each buffer is written once and read
  once.
* Compute instructions say where inputs come from and outputs go: ``in``/``out`` for F
  (``"data"`` = the microbatch, ``"loss"`` = the loss function), ``grad_in``/``grad_out`` for B
  and I (``null`` = none).  ``local: true`` marks an output that stays on this rank (a
  V-placement fold).  ``chunk`` indexes the rank's stages in ascending order.
* ``forward_only: true`` marks an evaluation plan (no backward on any rank, the
  ``forward-only`` pass's output): its forwards keep nothing for a backward.
* ``meta`` (shape metadata per boundary) is ``null`` in a compiled plan; ``digest`` is the
  SHA-256 of everything else (:func:`ppir.plan.io.plan_digest`).
"""

from __future__ import annotations

from ppir.diagnostics import count
from ppir.ir import (
    Action,
    Group,
    OpKind,
    Overlap,
    Reduce,
    Schedule,
    Wait,
    deps,
    is_compute_item,
    item_actions,
)
from ppir.ir.printer import schedule_header
from ppir.ir.reduce import place_reduces

PLAN_FORMAT = "ppir.plan/2"


class PlanError(ValueError):
    """A plan that cannot be executed; the message names the field or instruction."""


def is_evaluation_plan(plan: dict) -> bool:
    """True for an evaluation plan: ``"forward_only": true`` (validation refuses any value but
    true or false)."""
    return plan.get("forward_only") is True


def boundary_of(buffer: str) -> int:
    """The stage boundary a buffer id crosses (``a3.1`` -> 3; see ``deps.Message.buffer``)."""
    return int(buffer[1:].split(".")[0])


def compute_instruction(s: Schedule, a: Action, chunk: int) -> dict:
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


def comm_op(s: Schedule, a: Action) -> dict:
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


def reduce_instruction(stage: int, chunk: int) -> dict:
    return {"op": "reduce", "stage": stage, "chunk": chunk, "ir": f"{stage}REDUCE_GRAD"}


def _rank_program(s: Schedule, r: int) -> list[dict]:
    chunk = {st: c for c, st in enumerate(s.stages_of_rank[r])}
    prog = s.programs[r]
    out: list[dict] = []
    posted: dict[tuple, dict] = {}  # deferred groups of this rank by their actions
    for it in prog:
        if isinstance(it, Reduce):
            if it.stage not in chunk:
                raise PlanError(f"rank {r}: {it} reduces a stage the rank does not hold")
            out.append(reduce_instruction(it.stage, chunk[it.stage]))
        elif isinstance(it, Wait):
            g = posted.pop(it.actions, None)
            if g is None:
                raise PlanError(f"rank {r}: {it} waits for no deferred group posted before")
            recv = [o["buffer"] for o in g["ops"] if o["op"] == "recv"]
            out.append({"op": "wait", "group": g["id"], "ir": str(it), "recv": recv})
        elif not is_compute_item(it):
            ins = {"op": "group", "ops": [comm_op(s, a) for a in item_actions(it)], "ir": str(it)}
            if isinstance(it, Group) and it.deferred:
                ins["deferred"] = True
                ins["id"] = len(out)
                posted[it.actions] = ins
            out.append(ins)
        elif isinstance(it, Overlap):  # an overlapped step runs its parts in order
            for part, a in enumerate(it.actions):
                out.append({**compute_instruction(s, a, chunk[a.stage]), "overlap": part})
        else:
            out.append(compute_instruction(s, it, chunk[it.stage]))
    if posted:
        first = next(iter(posted.values()))["ir"]
        raise PlanError(
            f"rank {r}: {count(len(posted), 'deferred group')} never waited on, e.g. {first}"
        )
    return out


def runtime_limit(schedule: Schedule) -> str | None:
    """Why ppir's executor cannot run ``schedule`` (None when it can): the one rule that
    :func:`build_plan` refuses by and ``ppir tune`` marks its choices with."""
    if schedule.pipelines > 1:
        return (
            f"{schedule.name} runs {schedule.pipelines} pipelines (replicas of one model); the "
            "executor runs one pipeline of distinct stages, so it cannot run it yet"
        )
    return None


def build_plan(schedule: Schedule) -> dict:
    """The ``ppir.plan/2`` object for a lowered schedule (see the module docstring).

    Raises :class:`PlanError` when the schedule is not lowered, waits for a group it never
    posted, or reads a buffer before anything on the rank provides it.
    """
    from ppir.plan.io import plan_digest

    limit = runtime_limit(schedule)
    if limit is not None:
        raise PlanError(limit)
    if not schedule.is_lowered and deps.has_boundaries_across_ranks(schedule.placement):
        raise PlanError(
            "the program has no communication: lower it first (the lower-comms pass, which "
            "ppir.compile and 'ppir compile' run unless a -p/passes pipeline leaves it out)"
        )
    s = place_reduces(schedule)
    plan = {
        "format": PLAN_FORMAT,
        **schedule_header(s),
        "stages_of_rank": [list(x) for x in s.stages_of_rank],
        "split_backward": s.uses_split_backward(),
        "meta": None,
        "programs": [_rank_program(s, r) for r in range(s.ranks)],
    }
    check_buffers(plan)
    plan["digest"] = plan_digest(plan)
    return plan


def reads_writes(ins: dict) -> tuple[list[str], list[str]]:
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


def check_buffers(plan: dict) -> None:
    """On each rank every buffer is provided (by a recv or a local compute output) before it is
    read; PlanError naming the rank and instruction otherwise."""
    for r, prog in enumerate(plan["programs"]):
        have: set[str] = set()
        for i, ins in enumerate(prog):
            reads, writes = reads_writes(ins)
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
        f"{plan['schedule']}: {count(plan['ranks'], 'rank')}, {count(plan['stages'], 'stage')}, "
        f"{count(plan['microbatches'], 'microbatch')}, {count(n, 'instruction')}"
    )
