"""The program ``ppir tune`` searches for one choice: a schedule loaded with the P, v and M whose
step runs exactly the microbatches the global batch needs, G / (dp x micro-batch size).

A schedule's M is the step's microbatch count for every built-in (bidirectional DualPipe
declares M // 2 per pipeline), but not for every schedule: one of two pipelines that declares
``microbatches M`` runs 2M per step.  :func:`load_for_batch` loads the schedule with M = the
count needed; when its step runs another count (:func:`step_microbatches`), it loads it again
with the M that scales the step to that count, when that M is a whole number, and refuses the
choice (:class:`Refused`) when no M gives the count."""

from __future__ import annotations

from ppir.analysis.units import microbatch_json
from ppir.diagnostics import PpirError, count
from ppir.frontend.loader import load_schedule


class Refused(Exception):
    """A choice ``ppir tune`` rejects before compiling: ``why`` (``constraint`` or
    ``divisibility``), the ``reason`` it prints and the schedule ``file`` that reason points
    into (:func:`refused_file`)."""

    def __init__(self, why: str, reason: str, file: str | None = None):
        super().__init__(reason)
        self.why, self.reason, self.file = why, reason, file


def step_microbatches(program) -> int:
    """The microbatches one step of ``program`` runs, every pipeline's together, as the JSON
    reports count them (:func:`microbatch_json`)."""
    return microbatch_json(program.microbatches, program.pipelines)["microbatches"]


def load_for_batch(name, params: set[str], values: dict, builtin: bool):
    """(the program, the M it was given, or None when the schedule takes none) of schedule
    ``name`` (taking ``params``) at ``values`` (P, M, v; M the microbatches the step needs),
    whose step runs ``values["M"]`` microbatches; :class:`Refused` when the schedule refuses
    the values or no M makes its step run that many."""
    need = values["M"]
    given = {k: values[k] for k in params if k in values}
    s = _load(name, given, builtin)
    runs = step_microbatches(s)
    if not params and (s.ranks, runs) != (values["P"], need):  # a fixed program (CSV, JSON)
        raise Refused(
            "constraint",
            f"the program has {count(s.ranks, 'rank')} and {count(runs, 'microbatch')}, not "
            f"{values['P']} and {need}",
        )
    if runs == need:
        return s, given.get("M")
    if "M" not in given:
        raise Refused(
            "divisibility",
            f"runs {count(runs, 'microbatch')} per step whatever the batch (it takes no M); "
            f"the global batch needs {need}",
        )
    scaled = need * given["M"]
    if runs and scaled % runs == 0 and scaled // runs >= 1:
        m = scaled // runs
        try:
            s2 = _load(name, {**given, "M": m}, builtin)
        except Refused as e:
            raise Refused(
                e.why, f"M={m} (for a step of {count(need, 'microbatch')}): {e.reason}", e.file
            ) from None
        if step_microbatches(s2) == need:
            return s2, m
        s, given, runs = s2, {**given, "M": m}, step_microbatches(s2)
    split = f" ({s.pipelines} pipelines of {s.microbatches})" if s.pipelines > 1 else ""
    raise Refused(
        "divisibility",
        f"M={given['M']} runs {count(runs, 'microbatch')} per step{split}; the global batch "
        f"needs {need}",
    )


def _load(name, given: dict, builtin: bool):
    try:
        return load_schedule(name, given, builtin=builtin)
    except PpirError as e:
        d = e.diagnostics[0]
        raise Refused("constraint", refusal(d), refused_file(d)) from None


def refusal(d) -> str:
    """The reason a choice is rejected for the diagnostic ``d`` that refused it: its message,
    and where it points (as ``ppir sweep`` says it) unless a ``require`` line failed, whose
    message quotes that line's own words; so a mistake in a schedule file (an unknown operation,
    an undefined name) is found from tune's output."""
    if d.kind == "require-failed" or d.span is None:
        return d.message
    return f"{d.message} (at {d.span})"


def refused_file(d) -> str | None:
    """The schedule file that :func:`refusal`'s reason for ``d`` points into (its ``(at
    path:line:col)``), None when it points nowhere."""
    return None if d.kind == "require-failed" or d.span is None else d.span.path


def refuse(c, d):
    """Candidate ``c`` rejected as a constraint for the diagnostic ``d`` (None: its program
    does not verify, with no error to quote); returns ``c``."""
    c.why = "constraint"
    c.reason = refusal(d) if d is not None else "the program does not verify"
    c.file = refused_file(d) if d is not None else None
    return c
