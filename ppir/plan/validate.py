"""Validate a plan completely before any rank posts anything.

:func:`validate_plan` checks, in order, and raises :class:`PlanError` naming the field:

1. the schema: every header field present with the right type and range, one non-empty
   program per rank that holds stages, every instruction an object with a known ``op`` and its
   IR text ``ir``;
2. the instructions against the IR they claim to be: the program is rebuilt from the ``ir``
   texts (:func:`plan_schedule`) and planned again (:func:`ppir.plan.build.build_plan`); every
   field of every instruction must equal the rebuilt one (peers, buffers, chunks, reduce
   instructions, ...), so crossed buffers or a peer outside the world cannot slip through;
3. the program itself: :func:`ppir.verify.verify` (every op once, messages matched, no
   deadlock) unless ``verify=False``;
4. the digest: a plan edited after ppir wrote it is refused even if it is consistent.
"""

from __future__ import annotations

from ppir.ir import Action, Group, Overlap, Reduce, Schedule, Wait
from ppir.plan.build import PLAN_FORMAT, PlanError, build_plan, is_evaluation_plan

OPS = frozenset({"F", "B", "I", "W", "group", "wait", "reduce"})
_INTS = ("ranks", "stages", "microbatches")


def validate_plan(plan, *, verify: bool = True) -> Schedule:
    """Check ``plan`` (see the module docstring); returns the schedule it was built from."""
    _check_schema(plan)
    s = plan_schedule(plan)
    _compare(plan, s)
    if verify:
        _verify(s)
    _check_digest(plan)
    return s


# ---------------------------------------------------------------------- 1. schema
def _check_schema(plan) -> None:
    if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
        got = plan.get("format") if isinstance(plan, dict) else type(plan).__name__
        hint = " (written by an older ppir: compile it again)" if got == "ppir.plan/1" else ""
        raise PlanError(f"not a {PLAN_FORMAT} plan (format = {got!r}){hint}")
    for key in ("schedule", "params", *_INTS, "placement", "programs", "digest"):
        if key not in plan:
            raise PlanError(f"the plan lacks the field '{key}'")
    for key in _INTS:
        v = plan[key]
        if not _is_int(v) or v < 1:
            raise PlanError(f"'{key}' must be a positive integer, got {v!r}")
    if not isinstance(plan.get("forward_only", False), bool):
        raise PlanError(f"'forward_only' must be true or false, got {plan['forward_only']!r}")
    if not isinstance(plan["schedule"], str):
        raise PlanError(f"'schedule' must be a string, got {plan['schedule']!r}")
    params = plan["params"]
    if not isinstance(params, dict) or not all(
        isinstance(k, str) and _is_int(v) for k, v in params.items()
    ):
        raise PlanError(f"'params' must map names to integers, got {params!r}")
    ranks, stages = plan["ranks"], plan["stages"]
    placement = plan["placement"]
    if not isinstance(placement, list) or len(placement) != stages:
        raise PlanError(f"'placement' must list the rank of each of the {stages} stages")
    for s, r in enumerate(placement):
        if not _is_int(r) or not 0 <= r < ranks:
            raise PlanError(f"placement[{s}] = {r!r} is not a rank of the {ranks}-rank world")
    programs = plan["programs"]
    if not isinstance(programs, list) or len(programs) != ranks:
        n = len(programs) if isinstance(programs, list) else type(programs).__name__
        raise PlanError(f"'programs' must hold one program per rank ({ranks}), got {n}")
    held = set(placement)
    for r, prog in enumerate(programs):
        if not isinstance(prog, list):
            raise PlanError(f"programs[{r}] must be a list of instructions")
        if not prog and r in held:
            raise PlanError(f"programs[{r}] is empty, but rank {r} holds stages")
        for i, ins in enumerate(prog):
            if not isinstance(ins, dict):
                raise PlanError(f"programs[{r}][{i}] must be an object, got {ins!r}")
            if ins.get("op") not in OPS:
                raise PlanError(
                    f"programs[{r}][{i}]: unknown op {ins.get('op')!r} "
                    f"(expected one of {', '.join(sorted(OPS))})"
                )
            if not isinstance(ins.get("ir"), str):
                raise PlanError(f"programs[{r}][{i}] lacks its IR text (the field 'ir')")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# ---------------------------------------------------------------------- 2. IR and rebuild
def _actions(text: str) -> tuple[Action, ...]:
    words = text.split()
    if not words:
        raise ValueError("an empty group")
    return tuple(Action.parse(w) for w in words)


def _item(ins: dict):
    """The IR item an instruction claims to be (an Overlap part gives its Action)."""
    op, text = ins["op"], ins["ir"].strip()
    if op == "reduce":
        return Reduce.parse(text)
    if op == "wait":
        if not (text.startswith("wait[") and text.endswith("]")):
            raise ValueError(f"a wait instruction's IR must read wait[...], got {text!r}")
        return Wait(_actions(text[5:-1]))
    if op == "group":
        deferred = text.startswith("post[")
        if deferred or text.startswith("["):
            if not text.endswith("]"):
                raise ValueError(f"unterminated group {text!r}")
            return Group(_actions(text[5 if deferred else 1 : -1]), deferred=deferred)
        a = Action.parse(text)
        if a.kind.is_compute:
            raise ValueError(f"a group instruction holds communication, got {text!r}")
        return a
    a = Action.parse(text)
    if a.kind.value != op:
        raise ValueError(f"op {op!r} but the IR text says {text!r}")
    return a


def plan_schedule(plan: dict) -> Schedule:
    """The lowered schedule a (schema-checked) plan's ``ir`` texts spell out; PlanError naming
    the instruction when a text is not an IR item."""
    programs = []
    for r, prog in enumerate(plan["programs"]):
        items: list = []
        pending: Action | None = None  # the forward half of an overlapped step
        for i, ins in enumerate(prog):
            try:
                it = _item(ins)
                part = ins.get("overlap")
                if pending is not None:
                    if part != 1:
                        raise ValueError("the second part of an overlapped step is missing")
                    items.append(Overlap((pending, it)))
                    pending = None
                elif part == 0:
                    pending = it
                elif part is not None:
                    raise ValueError(f"'overlap' is {part!r} outside an overlapped step")
                else:
                    items.append(it)
            except ValueError as e:
                raise PlanError(f"programs[{r}][{i}].ir: {e}") from None
        if pending is not None:
            raise PlanError(f"programs[{r}] ends inside an overlapped step ({pending})")
        programs.append(tuple(items))
    return Schedule(
        plan["schedule"],
        tuple(plan["params"].items()),
        plan["ranks"],
        plan["stages"],
        plan["microbatches"],
        tuple(plan["placement"]),
        tuple(programs),
        forward_only=is_evaluation_plan(plan),
    )


def _compare(plan: dict, s: Schedule) -> None:
    try:
        want = build_plan(s)
    except PlanError as e:
        raise PlanError(f"the plan's program cannot run: {e}") from None
    for key in ("stages_of_rank", "split_backward"):
        if plan.get(key) != want[key]:
            raise PlanError(f"'{key}' is {plan.get(key)!r}, but the placement gives {want[key]!r}")
    for r, (got_prog, want_prog) in enumerate(zip(plan["programs"], want["programs"])):
        for i, (got, exp) in enumerate(zip(got_prog, want_prog)):
            _compare_fields(f"programs[{r}][{i}] ({exp['ir']})", got, exp, plan["ranks"])
        if len(got_prog) != len(want_prog):
            n = min(len(got_prog), len(want_prog))
            what = (
                f"an extra instruction {got_prog[n]['ir']!r}"
                if len(got_prog) > n
                else f"no instruction {want_prog[n]['ir']!r}"
            )
            raise PlanError(
                f"programs[{r}] has {len(got_prog)} instructions where its IR gives "
                f"{len(want_prog)}: at #{n}, {what}"
            )


def _compare_fields(where: str, got: dict, want: dict, ranks: int) -> None:
    for key, value in want.items():
        if key not in got:
            raise PlanError(f"{where} lacks the field '{key}'")
        g = got[key]
        if key == "ops" and isinstance(g, list) and len(g) == len(value):
            for j, (go, wo) in enumerate(zip(g, value)):
                if not isinstance(go, dict):
                    raise PlanError(f"{where}.ops[{j}] must be an object")
                _compare_fields(f"{where}.ops[{j}]", go, wo, ranks)
            continue
        if g != value or type(g) is not type(value):
            if key == "peer" and not (_is_int(g) and 0 <= g < ranks):
                raise PlanError(f"{where}: peer {g!r} is outside the world of {ranks} ranks")
            raise PlanError(f"{where}: '{key}' is {g!r}, but the IR item gives {value!r}")
    extra = sorted(set(got) - set(want))
    if extra:
        raise PlanError(f"{where} has an unexpected field '{extra[0]}'")


# ---------------------------------------------------------------------- 3. verify, 4. digest
def _verify(s: Schedule) -> None:
    from ppir.verify import verify

    report = verify(s)
    if not report.ok:
        d = report.errors[0]
        more = len(report.errors) - 1
        tail = f" (and {more} more finding{'s' if more > 1 else ''})" if more else ""
        raise PlanError(f"the plan's program does not verify: {d.message}{tail}")


def _check_digest(plan: dict) -> None:
    from ppir.plan.io import plan_digest

    if plan["digest"] != plan_digest(plan):
        raise PlanError(
            "the plan was changed after ppir wrote it: its digest does not match its content "
            "(write it again with 'ppir compile --backend cuda')"
        )
