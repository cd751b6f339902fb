"""The functions of ppir's Python API (``ppir.load``, ``ppir.compile``, ``ppir.verify``...).

``import ppir`` reaches them, and the types they take and return, lazily (see
``ppir/__init__.py``), so that the command line starts without importing the compiler;
docs/api.md documents them as ``ppir.NAME``.
"""

from __future__ import annotations

import os

from ppir.analysis.analyze import Analysis, analyze_compiled
from ppir.analysis.config import CostConfig
from ppir.analysis.layout import check_layer_count
from ppir.analysis.model_spec import parse_model_spec
from ppir.analysis.models import ModelShape
from ppir.diagnostics import PpirError, Report
from ppir.frontend.keywords import keyword_typo
from ppir.frontend.loader import declared_params, load_schedule, merge_params
from ppir.ir import Schedule
from ppir.ir.graph import ProgramGraph, build_graph, check_progress
from ppir.ir.printer import format_pps
from ppir.ir.printer import to_json as _program_json
from ppir.ir.shape import check_schedule
from ppir.passes import LowerComms
from ppir.pipeline import Compiled
from ppir.pipeline import compile as _compile
from ppir.verify import verify as _check  # loads the ppir.verify package before the function

Program = Schedule | Compiled


def load(
    spec: str | os.PathLike,
    params: dict[str, int] | None = None,
    *,
    placement: tuple[int, ...] | None = None,
    **more: int,
) -> Schedule:
    """Parse and expand a schedule: a built-in name, ``torch:NAME``, or the path (a ``str`` or
    an ``os.PathLike``) of a ``.pps`` file, a torch ``.csv`` file or a ``ppir.program/1``
    ``.json`` file (what ``ppir dump --format json`` writes; CSV and JSON files take no
    parameters).  Its parameters, integers, as a dict, as keywords (``P=4, M=8``) or both, as
    for :func:`load_text` (a ``bad-usage`` error when the two give one different values).
    ``placement`` (by keyword: the rank of each stage) is for CSV and ``torch:NAME``
    schedules.  A ppir error, with file:line:col where there is one, for bad input (a
    ``spec`` or ``params`` of another type included)."""
    hint = "a placement is given by keyword: placement=(0, 1, ...)"  # load((0, 1, 2, 3))
    params = merge_params(params, more, hints=[hint])
    try:
        return load_schedule(spec, params, placement=placement, define_flag="")
    except PpirError as e:  # load(s, placment=...): placement misspelt?
        raise keyword_typo(e, load, params, more, lambda: declared_params(spec)) from None


def compile(schedule: Schedule, **options) -> Compiled:  # noqa: A001 - the library's verb
    """Compile ``schedule`` exactly as ``ppir compile`` does; see :func:`ppir.pipeline.compile`
    for the options (``lowering``, ``overlap``, ``costs``, ``verify``, ``progress``, ``strict``,
    ``passes``, ``dp``, ``input_timeline``)."""
    return _compile(schedule, **options)


compile.__wrapped__ = _compile  # help() and inspect.signature show the options


def _compiled(program: Program, costs: CostConfig | None = None, progress: str = "fifo"):
    if isinstance(program, Compiled):
        return program
    return _compile(program, costs=costs, progress=progress)


def _program(program, fn: str):
    """``program`` when it is a well-formed Schedule (:func:`ppir.ir.shape.check_schedule`) or
    a Compiled; else a TypeError saying what ``fn`` takes and how to make one."""
    if not isinstance(program, (Schedule, Compiled)):
        raise TypeError(
            f"{fn} takes a Schedule (ppir.load('1f1b', P=4, M=8) makes one) or what "
            f"ppir.compile returns, got {type(program).__name__} {program!r:.60}"
        )
    if isinstance(program, Schedule):
        check_schedule(program, fn)
    return program


# ``ppir.verify`` names this function; the checks live in the package of the same name, and
# ppir/__init__.py keeps the package attribute the function when that package is imported.
def verify(program: Program, *, progress: str | None = None, strict: bool = False) -> Report:
    """The verification report of ``program`` as it would run: a compiled program's own, a
    lowered schedule's, or a compute-only schedule's after compiling it (as ``ppir check``).
    ``progress`` None: a compiled program's own model, else ``"fifo"``."""
    if not isinstance(strict, bool):
        raise TypeError(f"strict takes True or False, got {strict!r}")
    progress = _progress(_program(program, "verify"), progress)
    if isinstance(program, Compiled) and program.report is not None:
        r = program.report  # made under the compile's progress model, lints as it said
        # its lints are warnings, or errors when compiled with strict: reused when they read
        # as ``strict`` asks (errors may be a strict compile's lints: checked again)
        if program.progress == progress and not (strict and r.warnings) and (strict or r.ok):
            return r
    if isinstance(program, Schedule) and not program.is_lowered:
        return _compile(program, progress=progress, strict=strict).report
    target = program.program if isinstance(program, Compiled) else program
    return _check(target, progress, strict)


def _progress(program, progress: str | None) -> str:
    """The progress model asked for: None is a compiled program's own, else ``"fifo"``; a
    ValueError naming any other value than these and the models."""
    if progress is not None:
        check_progress(progress)
        return progress
    return program.progress if isinstance(program, Compiled) else "fifo"


def estimate(program: Program, costs: CostConfig | None = None, *, progress: str | None = None):
    """The :class:`Estimate` of one training step of ``program`` (compiled with ``costs`` when
    it is a compute-only schedule), as ``ppir compile --backend cost`` prints it.
    ``progress`` None: a compiled program's own model, else ``"fifo"``."""
    from ppir.analysis.estimate import estimate as _estimate

    if costs is not None and not isinstance(costs, CostConfig):
        raise TypeError(
            f"costs takes a CostConfig (ppir.make_config({{...}}) makes one), got "
            f"{type(costs).__name__}"
        )
    progress = _progress(_program(program, "estimate"), progress)
    if isinstance(program, Compiled):
        if (costs is not None and not _compiled_with(program, costs)) or (
            progress != program.progress
        ):
            raise ValueError(
                "estimate: a compiled program is timed under the costs and progress model it "
                "was compiled with; compile it again with them (ppir.compile(c.source, "
                "costs=..., progress=...)) or estimate the schedule, ppir.estimate(c.source, "
                "costs)"
            )
        return program.estimate
    return _estimate(program, costs, progress=progress)


def _compiled_with(c: Compiled, costs: CostConfig) -> bool:
    """Whether ``c`` was compiled with ``costs``: its config is ``costs`` with the model at
    ``c``'s data-parallel size, as :func:`ppir.compile` resolves them (``dp=``)."""
    from ppir.analysis.dp import resolve_dp

    try:
        return resolve_dp(costs, c.dp)[0] == c.config
    except PpirError:  # a model at another dp: other costs
        return False


def analyze(
    program: Program,
    model: ModelShape | str | None = None,
    *,
    recompute: str = "none",
    i_fraction=None,
    layers: int | None = None,
) -> Analysis:
    """Activation memory per rank and point-to-point traffic of ``program`` as it runs
    (compiled first when it is a compute-only schedule); ``model`` (a :class:`ModelShape` or a
    spec such as ``"llama3-8b,tp=8"``) adds bytes and the whole per-rank memory
    (``footprint``), as ``ppir analyze --model`` prints them; a schedule is then compiled with
    the model's costs, as the command does (the lowering, and so the receive buffers, depend
    on them)."""
    if isinstance(model, str):
        model = parse_model_spec(model, "model")  # named as the argument, not as --model
    elif model is not None and not isinstance(model, ModelShape):
        raise TypeError(
            f"model takes a ModelShape or a spec such as 'llama3-8b,tp=8', got "
            f"{type(model).__name__} {model!r:.60}"
        )
    if layers is not None:  # named as the argument, not as the command's --layers
        check_layer_count(layers, "layers")
    costs = None
    if model is not None:  # the model's costs plan the lowering, as 'ppir analyze --model'
        from ppir.analysis.analyze import with_layers
        from ppir.analysis.config import make_config
        from ppir.analysis.model_spec import model_table

        sized = with_layers(model, layers)
        costs = make_config(
            {"model": model_table(sized, None if recompute == "none" else recompute)}
        )
    c = _compiled(_program(program, "analyze"), costs)
    c.check()  # the verification's errors, or the ranks an unverified program leaves stuck
    return analyze_compiled(c, model, recompute=recompute, i_fraction=i_fraction, layers=layers)


def graph(program: Program, progress: str | None = None) -> ProgramGraph:
    """The networkx dependency graph of a program (a :class:`ProgramGraph`, a read-only
    ``networkx.DiGraph``): of a compiled program's program, or of a schedule as given.
    ``progress`` None: a compiled program's own model, else ``"fifo"``."""
    progress = _progress(_program(program, "graph"), progress)
    if isinstance(program, Compiled):
        return (
            program.graph
            if program.progress == progress
            else build_graph(program.program, progress)
        )
    return build_graph(program, progress)


def to_json(program: Program) -> dict:
    """The ``ppir.program/1`` JSON object of a program (what ``ppir dump --format json``
    prints)."""
    _program(program, "to_json")
    return _program_json(program.program if isinstance(program, Compiled) else program)


def to_pps(program: Program) -> str:
    """The literal ``.pps`` text of a program (it parses back to the same IR); a ``bad-name``
    ppir error when the header cannot hold its name (letters, digits, ``_`` and ``-``, not
    ``-`` first) or a parameter's, with a name it can."""
    _program(program, "to_pps")
    return format_pps(program.program if isinstance(program, Compiled) else program)


def lower(schedule: Schedule, strategy: str = "lockstep") -> Schedule:
    """Insert communication with one lowering strategy, blocking groups (the lower-comms pass
    alone; :func:`compile` is what the tools run)."""
    check_schedule(schedule, "lower")
    return LowerComms(strategy).apply(schedule)
