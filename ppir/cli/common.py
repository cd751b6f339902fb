"""Options and helpers shared by the commands that take a SCHEDULE."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import warnings

from ppir.cli.argtypes import output_path, positive_int
from ppir.cli.deprecation import Renamed
from ppir.cli.output import add_quiet_argument, progress
from ppir.compile_options import IgnoredOptionWarning, pipeline_conflict
from ppir.diagnostics import Report, error
from ppir.frontend.expand import DEFAULT_MAX_OPS, DEFAULT_MAX_STEPS
from ppir.frontend.limits import define_value, read_int
from ppir.frontend.loader import load_schedule
from ppir.frontend.torch_import import hint_known_issue
from ppir.ir import Schedule
from ppir.ir.graph import PROGRESS_MODELS
from ppir.passes import PASSES
from ppir.pipeline import LOWERINGS, Compiled, compile, on_stage

SCHEDULE_HELP = (
    "a .pps file, a torch .csv schedule, a 'ppir dump --format json' program, a built-in name "
    "(see 'ppir list') or torch:NAME"
)

PLACEMENT_HELP = (
    "for CSV and torch:NAME schedules: the rank of each stage (default: inferred from where "
    "each stage computes, or torch's own)"
)

COMPILE_PROGRESS_DELAY = 2.0


@contextlib.contextmanager
def compile_clock(desc: str, quiet: bool = False):
    """The clock line of work that compiles (``desc: 00:05, verify``) on a terminal's stderr
    once it runs over :data:`COMPILE_PROGRESS_DELAY`, its status each stage a :func:`compile`
    inside the block starts; yields the bar, for the block's own stages."""
    with progress(None, desc, quiet=quiet, delay=COMPILE_PROGRESS_DELAY, clock=True) as bar:
        with on_stage(lambda stage: bar.update(0, stage)):
            yield bar


"""Seconds a compile runs before its progress line appears on a terminal (most take less)."""


def add_output_argument(p: argparse.ArgumentParser, help: str) -> None:
    """``-o/--output PATH`` (into ``args.output``): a file the command writes; an empty path is
    a usage error (:func:`ppir.cli.argtypes.output_path`)."""
    p.add_argument("-o", "--output", type=output_path, metavar="PATH", help=help)


# What ppir (or torch) takes a file of each suffix for: not the .pps text import and synth write.
NOT_PPS = {".csv": "a torch CSV", ".txt": "torch action text", ".json": "a ppir.program/1 JSON"}


def refuse_pps_output_as(out: str | None, command: str, hints: list[str]) -> None:
    """A usage error when ``-o OUT`` would hold .pps text under a suffix that ppir reads back
    as another format (``NOT_PPS``), where the .pps would not read back as the schedule."""
    for suffix, what in NOT_PPS.items():
        if (out or "").lower().endswith(suffix):
            raise error(
                "bad-usage",
                f"-o {out}: ppir {command} writes .pps text, and a {suffix} file is read back "
                f"as {what}",
                hints=hints,
            )


def add_defines(p: argparse.ArgumentParser, help: str) -> None:
    """``-D NAME=VALUE`` (repeatable, into ``args.defines``; read with :func:`parse_defines`)."""
    p.add_argument(
        "-D", dest="defines", action="append", default=[], metavar="NAME=VALUE", help=help
    )


def add_schedule_arguments(p: argparse.ArgumentParser) -> None:
    """SCHEDULE, -D, --placement and the expansion caps."""
    p.add_argument("schedule", metavar="SCHEDULE", help=SCHEDULE_HELP)
    add_defines(p, "set a schedule parameter, e.g. -D P=4 -D M=8 (repeatable)")
    p.add_argument(
        "--placement",
        metavar="R0,R1,...",
        help=PLACEMENT_HELP,
    )
    p.add_argument(
        "--max-ops",
        type=positive_int,
        default=DEFAULT_MAX_OPS,
        metavar="N",
        help=f"cap on expanded ops (default {DEFAULT_MAX_OPS:,})",
    )
    p.add_argument(
        "--max-steps",
        type=positive_int,
        default=DEFAULT_MAX_STEPS,
        metavar="N",
        help=f"cap on loop iterations during expansion (default {DEFAULT_MAX_STEPS:,})",
    )


def add_progress_model_argument(p, text: str) -> None:
    """``--progress-model {fifo,relaxed}`` (dest ``progress_model``); ``--progress`` is its
    deprecated spelling (one release)."""
    p.add_argument(
        "--progress-model",
        "--progress",
        dest="progress_model",
        action=Renamed,
        old="--progress",
        choices=PROGRESS_MODELS,
        default="fifo",
        help=text,
    )


def add_compile_arguments(p: argparse.ArgumentParser, model: bool = True) -> None:
    """How the schedule is compiled, the same for every command: --lowering, --overlap,
    --passes, --progress-model, --strict, --quiet (no progress bar for a long compile) and the
    cost options that plan and time it (``model``: also the model-shape options, for commands
    that do not take --model themselves)."""
    g = p.add_argument_group(
        "compilation",
        "every command compiles the same way, so 'ppir check' verifies what 'ppir launch' runs",
    )
    g.add_argument(
        "--lowering",
        choices=LOWERINGS,
        default=None,  # auto; None tells a --lowering given with -p (refused) from none
        help="how communication is inserted: lockstep (exchange where both ranks are between "
        "ops), eager (exchange when the producer finishes, planned with the cost options' "
        "transfer times), naive (each recv right before its consumer; deadlocks 1F1B; never "
        "overlapped); default auto: lockstep, and eager too when lockstep is slower than the "
        "dependency bound, the faster under the cost options",
    )
    g.add_argument(
        "--overlap",
        action=argparse.BooleanOptionalAction,
        default=None,  # on; None tells --overlap/--no-overlap given with -p from neither
        help="split each group's post from its wait (the overlap-comms pass) so transfers "
        "overlap compute (default: on)",
    )
    g.add_argument(
        "-p",
        "--passes",
        metavar="PIPELINE",
        help="an explicit pass pipeline instead of --lowering/--overlap (not with them), e.g. "
        "'lower-comms{strategy=eager},overlap-comms' (passes: " + ", ".join(PASSES) + ")",
    )
    add_progress_model_argument(
        g,
        "the verifier's progress model: one FIFO of groups per rank (default, what NCCL "
        "guarantees) or independent progress per peer channel (relaxed)",
    )
    g.add_argument("--strict", action="store_true", help="treat warnings (lints) as errors")
    g.add_argument("--no-verify", action="store_true", help="skip verification (not recommended)")
    add_quiet_argument(g)
    from ppir.cli.cost_options import add_cost_arguments

    add_cost_arguments(
        p.add_argument_group(
            "cost model",
            "what plans the lowering and times the program (as for 'ppir compile --backend "
            "cost'), e.g. --comm-latency 0.5: a message takes half a rank share's forward; "
            + (
                "with --model, --comm-latency-us 5: five microseconds"
                if model
                else "with a [model] table in --config, --comm-latency-us 5: five microseconds"
            ),
        ),
        model=model,
    )


def check_schedule_name(name: str, flag: str = "--name") -> str:
    """``name`` when a .pps header can carry it (what ``import`` and ``synth`` write); a usage
    error naming ``flag`` otherwise (a file 'ppir check' would refuse)."""
    from ppir.frontend.parser import is_schedule_name

    if not is_schedule_name(name):
        raise error(
            "bad-usage",
            f"{flag} {name!r}: a schedule name is ASCII letters, digits, '_' and '-', not "
            "starting with '-'",
        )
    return name


def parse_defines(defines: list[str], flag: str = "-D") -> dict[str, int]:
    """``-D`` values (``flag`` names the option in messages: ``-D2`` for ``ppir viz``)."""
    out: dict[str, int] = {}
    for d in defines:
        name, eq, value = d.partition("=")
        name = name.strip()
        if not eq or not name.isidentifier():
            raise error("bad-define", f"{flag} {d}: expected NAME=VALUE, e.g. {flag} P=4")
        v = define_value(d, name, value, flag)  # huge values: a short message, no ValueError
        if out.get(name, v) != v:
            raise error(
                "bad-define",
                f"{flag} {d}: '{name}' is already given ({flag} {name}={out[name]})",
                hints=["give each parameter once"],
            )
        out[name] = v
    return out


def parse_placement(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(read_int(x) for x in text.split(","))
    except ValueError:
        raise error(
            "bad-placement",
            f"--placement {text}: expected comma-separated ranks, e.g. --placement 0,1,1,0",
        ) from None


def load_from_args(args: argparse.Namespace) -> Schedule:
    """Parse and expand the SCHEDULE argument (compute-only, or as written for literal files)."""
    return load_schedule(
        args.schedule,
        parse_defines(args.defines),
        placement=parse_placement(args.placement),
        max_ops=args.max_ops,
        max_steps=args.max_steps,
    )


def compile_from_args(
    args: argparse.Namespace,
    schedule: Schedule | None = None,
    overlap: bool | None = None,
    *,
    unverified: str | None = None,
) -> Compiled:
    """Compile the SCHEDULE argument (or ``schedule``) as the command line says, through the
    one pipeline (:func:`ppir.compile`); ``overlap`` overrides --overlap (a backend that runs
    blocking groups only).  ``unverified``: what the command still does with a program that
    cannot run to its end under --no-verify, which the warning about it says."""
    from ppir.analysis.dp import resolve_dp
    from ppir.cli.cost_options import config_from_args

    _refuse_lowering_with_passes(args)
    quiet = getattr(args, "quiet", False)
    first = "compile" + (f" {args.schedule}" if schedule is None else "")
    with compile_clock(first, quiet) as bar:
        s = schedule
        if s is None:  # expanding (or torch building its order) can take long too
            torch = args.schedule.startswith("torch:")
            bar.update(0, "torch builds its order" if torch else "expand")
            s = load_from_args(args)
        costs, dp = resolve_dp(config_from_args(args), getattr(args, "dp", None), "--dp ")
        params = ", ".join(f"{k}={v}" for k, v in s.params)
        bar.rename(f"compile {s.name}" + (f"({params})" if params else ""))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IgnoredOptionWarning)  # said below, as flags
            c = compile(s, costs=costs, dp=dp, **_as_told(args, overlap))
    _note_ignored_lowering(args, s, costs)
    hint_known_issue(s, c.report)  # a torch class's order torch builds wrong: says so
    if getattr(args, "no_verify", False) and not c.ok:
        if not c.timeline.complete:
            what = (
                f"{s.name} cannot run to its end (a deadlock, or an op without a partner; "
                "'ppir check' says where): a run of it hangs until its timeout, and nothing "
                "timed (step time, charts) can be made of it"
            )
        else:
            m = len(c.mismatched)
            what = (
                f"{s.name}'s messages do not carry what their receivers expect (on {m} "
                f"channel{'s' if m > 1 else ''} a send meets a recv that expects another "
                "payload; 'ppir check' says where): a run of it computes on the wrong "
                "tensors, and nothing timed (step time, charts) can be made of it"
            )
        print(f"ppir: warning: {what}" + (f"; {unverified}" if unverified else ""), file=sys.stderr)
    return c


def compile_again(args: argparse.Namespace, compiled: Compiled, costs, overlap=None) -> Compiled:
    """``compiled``'s input compiled again as the command line said (lowering, overlap,
    passes, verification, progress model, dp: :func:`compile_from_args`'s call) under other
    ``costs``: the program the same command gives with other cost flags (``--stage-layers``),
    without its progress bar and warnings, which the first compile gave."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IgnoredOptionWarning)
        return compile(compiled.source, costs=costs, dp=compiled.dp, **_as_told(args, overlap))


def _as_told(args: argparse.Namespace, overlap: bool | None) -> dict:
    """The compile options the command line gives (:func:`ppir.compile`'s keywords but the
    costs and dp); ``overlap`` as in :func:`compile_from_args`."""
    return dict(
        lowering=args.lowering or "auto",
        overlap=_overlap(args, overlap),
        verify=not args.no_verify,
        progress=args.progress_model,
        strict=args.strict,
        passes=args.passes,
    )


def _overlap(args: argparse.Namespace, backend: bool | None) -> bool:
    """--overlap (default on), or the backend's ``overlap``; -p's pipeline says its own."""
    if args.passes is not None:
        return True  # the API's default: the pipeline text decides
    if backend is not None:
        return backend
    return args.overlap is not False


def _refuse_lowering_with_passes(args: argparse.Namespace) -> None:
    """--lowering or --overlap/--no-overlap with -p is a usage error: the pipeline spells out
    both, so they would be ignored without a word."""
    conflict = pipeline_conflict(args.passes, args.lowering, args.overlap, (None, None))
    if not conflict:
        return
    given, instead = conflict
    flags = [
        f"--lowering {v}" if k == "lowering" else ("--overlap" if v else "--no-overlap")
        for k, v in given
    ]
    said = f"{' '.join(flags)} is -p '{instead}'"
    if args.lowering == "auto":  # no one pipeline: it compiles lockstep, then maybe eager
        said = (
            f"--lowering auto compiles -p '{instead}' and, when that is slower than the "
            "dependency bound, the eager one too"
        )
    raise error(
        "bad-usage",
        f"{' and '.join(flags)} with -p: the pass pipeline spells out how to lower and "
        "overlap, so give one or the other",
        hints=[
            f"{said} (the strategy goes in lower-comms{{strategy=...}}, overlapping is the "
            "overlap-comms pass)"
        ],
    )


def _note_ignored_lowering(args: argparse.Namespace, s: Schedule, costs) -> None:
    """A written-out program with communication runs as written: say so when the command line
    asks to lower or overlap it (the options would otherwise be ignored without a word), or
    times it with link costs its groups were not placed for."""
    passes = getattr(args, "passes", None)
    if not s.is_lowered or (passes and passes.strip().startswith("forward-only")):
        return
    given = [
        flag
        for flag, on in (
            ("--lowering", getattr(args, "lowering", None) is not None),
            ("--no-overlap", getattr(args, "overlap", True) is False),
            ("-p", bool(passes)),
        )
        if on
    ]
    if given:
        print(
            f"ppir: warning: {' and '.join(given)} ignored: {s.name} already has its "
            "communication (SEND/RECV), so it runs as written; 'ppir dump --compute-only' "
            "gives its compute order to lower",
            file=sys.stderr,
        )
    elif not costs.free_comm and not getattr(args, "quiet", False):
        print(
            f"ppir: note: {s.name} already has its communication (SEND/RECV), placed when it "
            "was written, not for these link costs; 'ppir dump --compute-only' gives its "
            "compute order, which compile lowers for them",
            file=sys.stderr,
        )


def print_report(report: Report) -> bool:
    """Print a verification report's diagnostics to stderr; True when it has no error."""
    for d in report.grouped():
        print(d.render(), file=sys.stderr)
    return report.ok


def emit_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2)
    sys.stdout.write("\n")
