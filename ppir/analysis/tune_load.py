"""The program ``ppir tune`` searches for one choice: a schedule loaded with the P, v and M whose
step runs exactly the microbatches the global batch needs, G / (dp x micro-batch size).

A schedule's M is the step's microbatch count for every built-in (bidirectional DualPipe
declares M // 2 per pipeline), but not for every schedule: one of two pipelines that declares
``microbatches M`` runs 2M per step.  :func:`load_for_batch` loads the schedule with M = the
count needed; when its step runs another count (:func:`step_microbatches`), it loads it again
with the M that scales the step to that count, when that M is a whole number, and refuses the
choice (:class:`Refused`) when no M gives the count."""

from __future__ import annotations

from ppir.analysis.units import fmt_sizes_apart, microbatch_json
from ppir.diagnostics import PpirError, count
from ppir.frontend.expand import evaluate_top_level
from ppir.frontend.loader import load_schedule, parse_cached, read_source, schedule_kind
from ppir.ir import deps


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
    ``name`` (taking ``params``) at ``values`` (P, M, v, and tune's ``-D`` values, each used
    where ``params`` has it; M the microbatches the step needs),
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


def declared_stages(name, params: set[str], values: dict, builtin: bool) -> int | None:
    """The stages of one pipeline (one copy of the model) that schedule ``name`` declares at
    ``values`` (as :func:`load_for_batch` first loads it), read from its top-level
    declarations without expanding a program: what a model's layers must fill, known before
    the expansion that costs seconds at P=64.  None when the declarations do not say (a CSV,
    JSON or torch schedule, or one whose declarations fail: its load says why)."""
    try:
        if schedule_kind(name, builtin) != "pps":
            return None
        module = parse_cached(*read_source(name, builtin))
        shape = evaluate_top_level(module, {k: values[k] for k in params if k in values})
    except PpirError:
        return None
    return None if shape is None else deps.pipeline_length(shape[1], shape[2])


def layers_refusal(layers: int, span: int, uneven: bool) -> str | None:
    """Why ``layers`` cannot be laid on a pipeline of ``span`` stages (None: they can), with
    uneven splits allowed or not."""
    if layers < span:
        return f"{layers} layers cannot fill {span} stages: a stage would hold no layer"
    if layers % span and not uneven:
        return f"{layers} layers do not split evenly into {span} stages"
    return None


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


def over_budget(c, budget, compiled: bool = True):
    """Reject ``c`` for memory.  Before it is compiled (``compiled`` False) its program holds no
    receive buffers yet, so a whole-memory figure is a lower bound on the compiled program's
    peak (ppir compile's), and the reason says "at least"; peak activations in A are exact."""
    unit = "A" if budget[1] == "A" else "bytes"
    what = "peak memory" if c.footprint is not None else "peak activations"
    rank = c.footprint.worst.rank if c.footprint is not None else None
    bound = not compiled and c.footprint is not None
    note = "; receive buffers not counted: not compiled" if bound else ""
    where = f" on rank {rank} (largest term: {c.largest}{note})" if rank is not None else ""
    peak, limit = fmt_sizes_apart(c.peak, budget[0], unit)
    zero = f" at zero={c.zero}" if c.zero else ""  # the ZeRO stage it was counted at
    at_least = "at least " if bound else ""
    c.reason = f"{what} {at_least}{peak}{zero}{where} exceeds the budget {limit}"
    c.why = "memory"
    return c
