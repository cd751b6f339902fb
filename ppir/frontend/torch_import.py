"""Import torch.distributed.pipelining's built-in schedule classes as ppir schedules.

``load_torch_builtin("Interleaved1F1B", {"P": 4, "M": 8, "v": 2}) -> Schedule``

Contract
--------
* torch is imported here only, and only when a ``torch:NAME`` schedule is asked for; without
  torch the user gets a ``torch-missing`` diagnostic, not a traceback.
* The schedule is *what torch produces*: the class is constructed on stand-in stages (no process
  group), its compute-only ``pipeline_order`` is read, written as torch CSV text under the
  display path ``<torch>/NAME_P4_M8_v2.csv`` and parsed by :mod:`ppir.frontend.csvio`, so
  diagnostics quote the imported row and column.  Nothing is corrected: torch 2.13's 1F1B order
  labels the last rank's forwards 1..M, and ppir's verifier reports exactly that.
* Placement is torch's own (``stage_index_to_group_rank``; stage s on rank s for the single-stage
  classes).  ``M`` is the microbatch count the class was built with.
* Overlapped cells (DualPipeV) become overlapped steps, :class:`ppir.ir.Overlap`
  (:func:`ppir.frontend.csvio.expand_overlap`): torch's DualPipeV is then ppir's dualpipev.
* Parameters: ``P`` ranks (default 4), ``M`` microbatches (default 8), ``v`` stages per rank
  (default 1; 2 for ZBVZeroBubble and DualPipeV; GPipe and 1F1B take no ``v``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
from types import SimpleNamespace

from ppir.diagnostics import count, did_you_mean, error
from ppir.frontend.expand import integer_param
from ppir.frontend.keywords import check_known
from ppir.frontend.limits import DEFAULT_MAX_OPS, check_work
from ppir.ir import Schedule

SINGLE = ("GPipe", "1F1B")
MULTI = ("Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV")
NAMES = SINGLE + MULTI
DEFAULT_V = {"ZBVZeroBubble": 2, "DualPipeV": 2}


def canonical_name(name: str) -> str:
    """The spelling used here for a torch schedule name (case-insensitive); diagnostic if
    unknown."""
    for n in NAMES:
        if n.lower() == name.lower():
            return n
    bare = name[len("Schedule") :] if name.lower().startswith("schedule") else None
    known = next((n for n in NAMES if bare is not None and n.lower() == bare.lower()), None)
    hints = (
        [f"did you mean '{known}'? (torch:NAME takes torch's class name without 'Schedule')"]
        if known
        else did_you_mean(name, NAMES)
    )
    raise error(
        "unknown-torch-schedule",
        f"unknown torch schedule '{name}'",
        hints=hints + [f"torch schedules: {', '.join(NAMES)}"],
    )


def torch_params(name: str) -> tuple[str, ...]:
    """The parameters torch schedule ``name`` (canonical) takes: v only for a multi-stage
    class."""
    return ("P", "M") if name in SINGLE else ("P", "M", "v")


def torch_where(name: str) -> str:
    """How parameter errors name torch's class ``name`` (canonical): ``schedule 'torch:1F1B'``."""
    return f"schedule 'torch:{name}'"


def bind_torch_params(name: str, params: dict, flag: str = "") -> tuple[int, int, int]:
    """(P, M, v) from ``-D`` values, with defaults; diagnostics for unknown or bad ones, the
    names checked first, as a .pps schedule's are (``flag``: how they were given, ``-D``)."""
    check_known(params, torch_params(name), torch_where(name), flag)
    params = {k: integer_param(k, val) for k, val in params.items()}
    P, M, v = params.get("P", 4), params.get("M", 8), params.get("v", DEFAULT_V.get(name, 1))
    for k, val in (("P", P), ("M", M), ("v", v)):
        if val < 1:
            raise error("bad-define", f"torch:{name}: {k} must be at least 1, got {val}")
    return P, M, v


def _torch_schedules():
    try:
        from torch.distributed.pipelining import schedules
    except ImportError as e:
        raise error(
            "torch-missing",
            f"torch schedules need PyTorch, which cannot be imported here ({e})",
            hints=["pip install 'ppir[torch]'"],
        ) from None
    return schedules


def torch_schedule_object(name: str, P: int, M: int, v: int):
    """torch's schedule object for the class ``name``, built on stand-in stages.

    torch's own constraint errors (e.g. ``M >= 2P`` for DualPipeV) become ``torch-rejected``.
    """
    sch = _torch_schedules()
    cls = sch.get_schedule_class(name)

    def stage():
        return SimpleNamespace(
            num_stages=P * v, group_size=P, group_rank=0, stage_index=0, submod=None
        )

    stages = stage() if name in SINGLE else [stage() for _ in range(v)]
    log = logging.getLogger("torch.distributed.pipelining")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return cls(stages, M)
    except (ValueError, AssertionError, RuntimeError) as e:
        raise error(
            "torch-rejected",
            f"torch rejects {name}(P={P}, M={M}"
            + ("" if name in SINGLE else f", v={v}")
            + f"): {str(e).splitlines()[0]}",
            exit_code=2,
        ) from None
    finally:
        log.setLevel(level)


def torch_order(name: str, P: int, M: int, v: int) -> tuple[list[list[str]], tuple[int, ...]]:
    """(per-rank cell text with '' for idle, placement) of torch's compute-only order."""
    obj = torch_schedule_object(name, P, M, v)
    S = P * v if name in MULTI else P
    if name in MULTI:
        placement = tuple(obj.stage_index_to_group_rank[s] for s in range(S))
    else:
        placement = tuple(range(P))
    rows = []
    for r in range(P):
        cells = [] if obj.pipeline_order.get(r) is None else obj.pipeline_order[r]
        rows.append(
            [
                "" if a is None else str(a)
                for a in cells
                if a is None or a.computation_type.value != "REDUCE_GRAD"
            ]
        )
    return rows, placement


def display_path(name: str, P: int, M: int, v: int) -> str:
    tail = f"P{P}_M{M}" + ("" if name in SINGLE else f"_v{v}")
    return f"<torch>/{name}_{tail}.csv"


def load_torch_builtin(
    name: str,
    params: dict[str, int] | None = None,
    placement: tuple[int, ...] | None = None,
    max_ops: int = DEFAULT_MAX_OPS,
    option: str = "--placement",
    flag: str = "",
) -> Schedule:
    """The compute-only ppir Schedule of torch's built-in class ``name`` (see module doc).
    Sizes whose smallest complete schedule is over ``max_ops`` are refused before torch runs;
    ``option`` is how errors name ``placement`` (the API's ``placement``), ``flag`` how the
    parameters were given (:func:`bind_torch_params`)."""
    from ppir.frontend.csvio import read_csv_text

    name = canonical_name(name)
    P, M, v = bind_torch_params(name, dict(params or {}), flag)
    S = P * v if name in MULTI else P
    check_work(
        2 * S * M,
        f"torch:{name} with {count(S, 'stage')} x {count(M, 'microbatch')}",
        max_ops,
        None,
    )
    rows, torch_placement = torch_order(name, P, M, v)
    text = "".join(",".join(row) + "\n" for row in rows)
    bound = (("P", P), ("M", M)) + ((("v", v),) if name in MULTI else ())
    return read_csv_text(
        text,
        display_path(name, P, M, v),
        placement if placement is not None else torch_placement,
        name=f"torch_{name}",
        microbatches=M,
        params=bound,
        option=option,
    )


_KNOWN_ISSUES = {
    "torch_1F1B": "torch's Schedule1F1B builds its pipeline_order wrong on the last rank (torch "
    "2.13 labels its forwards 1..M; docs/torch-interop.md); its step() does not use that order. "
    "ppir's built-in 1f1b is the schedule it stands for",
}


def known_issue(schedule: Schedule) -> str | None:
    """Why a torch class's order (a schedule :func:`load_torch_builtin` made) fails to verify
    where torch itself is known to build it wrong; None for any other schedule."""
    return _KNOWN_ISSUES.get(schedule.name)


def hint_known_issue(schedule: Schedule, report) -> None:
    """When ``report`` (a failed verification of ``schedule``) is of an order torch is known
    to build wrong, its first error gets :func:`known_issue` as its first hint."""
    issue = known_issue(schedule) if report is not None and not report.ok else None
    if issue is not None:
        i = next(i for i, d in enumerate(report.diagnostics) if d.severity == "error")
        d = report.diagnostics[i]
        report.diagnostics[i] = dataclasses.replace(d, hints=(issue, *d.hints))


__all__ = [
    "NAMES",
    "canonical_name",
    "hint_known_issue",
    "known_issue",
    "load_torch_builtin",
    "torch_order",
    "torch_schedule_object",
]
