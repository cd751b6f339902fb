"""The options of :func:`ppir.pipeline.compile`: the values it refuses, the combinations it
refuses (``passes`` with ``lowering`` or ``overlap``: the pipeline text spells out both), the
pass list that ``lowering`` and ``overlap`` name, and the warning for options a literal
program with communication ignores (it runs as written)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

from ppir.analysis.timeline import Timeline
from ppir.passes import LowerComms, OverlapComms, PlaceReduce
from ppir.passes.driver import pipeline_text


class IgnoredOptionWarning(UserWarning):
    """An option of :func:`ppir.compile` that has no effect on this input (a literal program
    with communication runs as written); the command line prints its own warning instead."""


def default_passes(strategy: str, overlap: bool, reduces: bool = False) -> list:
    """The passes that ``lowering=strategy`` and ``overlap`` run (``naive`` never overlaps),
    then ``place-reduce`` when the program ``reduces`` its gradients
    (:func:`ppir.analysis.dp.reduce_members`)."""
    out = [LowerComms(strategy)]
    if overlap and strategy != "naive":
        out.append(OverlapComms())
    if reduces:
        out.append(PlaceReduce())
    return out


def pipeline_conflict(passes, lowering, overlap, unset=("auto", True)):
    """The options given with an explicit ``passes`` text, which it would silently override,
    as ``(name, value)`` pairs (those not at their ``unset`` values: the API's defaults, or
    None on the command line), and the pipeline text that ``lowering`` and ``overlap`` run
    (``auto``: the lockstep one, which it tries first); None when there is no conflict."""
    given = [
        (name, value)
        for name, value, default in (
            ("lowering", lowering, unset[0]),
            ("overlap", overlap, unset[1]),
        )
        if value is not default and value != default
    ]
    if passes is None or not given:
        return None
    strategy = "lockstep" if lowering in (None, "auto") else lowering
    return given, pipeline_text(default_passes(strategy, overlap is not False))


def check_options(verify, dp, overlap, strict, input_timeline, passes, lowering) -> None:
    """A ValueError or TypeError naming the option, for values the command line refuses."""
    if verify not in (True, False, "final") or not isinstance(verify, (bool, str)):
        raise ValueError(f"verify takes True, False or 'final', got {verify!r}")
    if isinstance(dp, bool) or not isinstance(dp, int):
        raise TypeError(f"dp takes an int, the data-parallel replicas, got {dp!r}")
    if dp < 1:
        raise ValueError(f"dp must be at least 1 (one replica: no data parallelism), got {dp}")
    for name, value in (("overlap", overlap), ("strict", strict)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} takes True or False, got {value!r}")
    if passes is not None and not isinstance(passes, str):
        raise TypeError(
            f"passes takes a pipeline text such as 'forward-only,lower-comms', got {passes!r:.60}"
        )
    if input_timeline is not None and not isinstance(input_timeline, Timeline):
        raise TypeError(f"input_timeline takes a Timeline or None, got {input_timeline!r:.60}")
    conflict = pipeline_conflict(passes, lowering, overlap)
    if conflict:
        given, instead = conflict
        named = " and ".join(f"{k}={v!r}" for k, v in given)
        raise ValueError(
            f"{named} with passes={passes!r}: passes spells out the whole pipeline, so "
            f"{' and '.join(k for k, _ in given)} would be ignored; give one or the other "
            f"({named} is passes={instead!r}: a strategy goes in 'lower-comms{{strategy=...}}', "
            "overlap is the 'overlap-comms' pass)"
        )


def warn_ignored(schedule, lowering: str, overlap: bool, passes: str | None) -> None:
    """An :class:`IgnoredOptionWarning` when a literal program with communication (which runs
    as written) is compiled with ``lowering``, ``overlap=False`` or ``passes``."""
    given = [
        f"{name}={value!r}"
        for name, value, on in (
            ("lowering", lowering, lowering != "auto"),
            ("overlap", overlap, overlap is False),
            ("passes", passes, passes is not None),
        )
        if on
    ]
    if not given:
        return
    warnings.warn(
        f"{' and '.join(given)} ignored: {schedule.name} already has its communication "
        "(SEND/RECV), so it runs as written (Compiled.pipeline is ''); compile its compute "
        "order, schedule.compute_only(), to lower it",
        IgnoredOptionWarning,
        stacklevel=_caller_level(),
    )


_PACKAGE = str(Path(__file__).resolve().parent)


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside ppir (the user's call), seen from the
    function that calls :func:`warnings.warn`."""
    frame, level = sys._getframe(2), 2
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level
