"""The shape of hand-built IR, checked where it comes in.

* The IR types check their own fields when built (:mod:`ppir.ir.types` calls the helpers here
  only when a field is not already of its type, so the frontends, which build hundreds of
  thousands of actions, pay a type test per field): an action's ``kind`` is an OpKind (or its
  text, ``"F"``, which becomes ``OpKind.F``), its ``stage`` and ``mb`` are integers; a group's,
  a wait's and an overlapped step's ``actions`` are Actions (a list becomes a tuple).
  TypeError or ValueError naming the field.
* :func:`check_schedule`: a whole :class:`~ppir.ir.types.Schedule`, when ``ppir.compile`` and
  the other library functions take one: the sizes are integers in range, the placement names a
  rank in range for each stage, there is one program per rank and each holds items of the IR's
  types.  A ``bad-schedule`` ppir error naming the field and the value otherwise.  Linear in
  the actions (13 ms for the 131,072 of interleaved 1F1B at P=32, M=512, v=4).

Stages are checked in range too (nothing can be timed of an op on a stage that does not
exist).  What the programs mean otherwise (microbatches in range, every op once, the order) is
the verifier's to report, with its diagnostics."""

from __future__ import annotations

_ITEMS = "an item is an Action, Group, Overlap, Wait or Reduce"


def action_fields(stage, kind, mb) -> tuple:
    """(stage, kind, mb) of an Action checked: ``kind`` an OpKind or its text, ``stage`` and
    ``mb`` integers (an integer type such as numpy's converted; a bool refused)."""
    from ppir.ir.types import OpKind

    if isinstance(kind, str) and not isinstance(kind, OpKind):
        try:
            kind = OpKind(kind)
        except ValueError:
            names = ", ".join(k.value for k in OpKind)
            raise ValueError(f"Action kind must be an OpKind ({names}), got {kind!r}") from None
    elif not isinstance(kind, OpKind):
        raise TypeError(f"Action kind must be an OpKind, got {type(kind).__name__} {kind!r:.40}")
    return int_field("Action stage", stage), kind, int_field("Action mb", mb)


def int_field(name: str, value) -> int:
    """``value`` as an int; TypeError naming ``name`` for a bool or a non-integer."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r:.40}")
    return value.__index__()


def actions_field(owner, what: str, action_type: type) -> None:
    """``owner.actions`` (of a Group, Wait or Overlap, ``what``) made a tuple, and each entry
    an ``action_type``; TypeError naming ``what`` otherwise."""
    acts = owner.actions
    if acts.__class__ is not tuple:
        if not isinstance(acts, (list, tuple)):
            raise TypeError(
                f"{what}'s actions must be a tuple of Actions, got {type(acts).__name__} "
                f"{acts!r:.40}"
            )
        acts = tuple(acts)
        object.__setattr__(owner, "actions", acts)
    for a in acts:
        if a.__class__ is not action_type:
            raise TypeError(f"{what} holds Actions, got {type(a).__name__} {a!r:.40}")


def require_schedule(s, fn: str) -> None:
    """A TypeError naming ``fn`` when ``s`` is no Schedule (the type alone: a pass's check)."""
    from ppir.ir.types import Schedule

    if not isinstance(s, Schedule):
        raise TypeError(
            f"{fn} takes a Schedule (ppir.load('1f1b', P=4, M=8) makes one), got "
            f"{type(s).__name__} {s!r:.60}"
        )


def check_schedule(s, fn: str = "compile") -> None:
    """A ``bad-schedule`` ppir error (exit 2) naming the field when ``s`` is not a well-formed
    Schedule (see the module docstring); a TypeError naming ``fn`` when it is no Schedule."""
    from ppir.diagnostics import count
    from ppir.ir.types import Action, Group, Overlap, Reduce, Wait

    require_schedule(s, fn)
    for name, low in (("ranks", 1), ("stages", 1), ("microbatches", 0), ("pipelines", 1)):
        value = getattr(s, name)
        if not _is_int(value) or value < low:
            _bad(f"Schedule.{name} must be an int of at least {low}, got {value!r:.40}")
    if s.stages % s.pipelines:
        _bad(f"Schedule.pipelines ({s.pipelines}) must divide the stages ({s.stages})")
    if not isinstance(s.name, str):
        _bad(f"Schedule.name must be a str, got {s.name!r:.40}")
    if not isinstance(s.forward_only, bool):
        _bad(f"Schedule.forward_only must be True or False, got {s.forward_only!r:.40}")
    params = s.params
    if not isinstance(params, (tuple, list)) or not all(
        isinstance(p, (tuple, list)) and len(p) == 2 and isinstance(p[0], str) and _is_int(p[1])
        for p in params
    ):
        _bad(f"Schedule.params must be (name, int) pairs, got {params!r:.60}")
    place = s.placement
    if not isinstance(place, (tuple, list)):
        _bad(
            f"Schedule.placement is {place!r:.60}, but it needs one per stage "
            f"(stages is {s.stages})"
        )
    if len(place) != s.stages:
        _bad(
            f"Schedule.placement gives a rank for {count(len(place), 'stage')}, but the "
            f"schedule has {count(s.stages, 'stage')}"
        )
    for st, r in enumerate(place):
        if not _is_int(r) or not 0 <= r < s.ranks:
            _bad(f"Schedule.placement[{st}] is {r!r:.40}, not a rank in 0..{s.ranks - 1}")
    progs = s.programs
    if not isinstance(progs, (tuple, list)) or len(progs) != s.ranks:
        n = f"holds {count(len(progs), 'program')}" if isinstance(progs, (tuple, list)) else "is"
        _bad(f"Schedule.programs {n}, but it needs one per rank (ranks is {s.ranks})")
    kinds = {Action, Group, Overlap, Wait, Reduce}
    stages = s.stages
    for r, prog in enumerate(progs):
        if not isinstance(prog, (tuple, list)):
            _bad(f"Schedule.programs[{r}] must be a tuple of items, got {prog!r:.40}")
        if not kinds.issuperset(map(type, prog)):
            i, it = next((i, it) for i, it in enumerate(prog) if type(it) not in kinds)
            why = " (Action.parse reads action text such as '2F0')" if isinstance(it, str) else ""
            _bad(f"Schedule.programs[{r}][{i}] is {type(it).__name__} {it!r:.40}: {_ITEMS}{why}")
        for it in prog:  # a stage outside the schedule has no cost, rank or partner to time
            for a in (it,) if it.__class__ in (Action, Reduce) else it.actions:
                if not 0 <= a.stage < stages:
                    _bad(
                        f"Schedule.programs[{r}] holds {it!s:.40}, on stage {a.stage}: outside "
                        f"0..{stages - 1} (stages is {stages})"
                    )


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _bad(message: str):
    from ppir.diagnostics import error

    raise error("bad-schedule", message)
