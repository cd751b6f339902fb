"""Options and helpers shared by the commands that take a SCHEDULE."""

from __future__ import annotations

import argparse
import json
import sys

from ppir.diagnostics import Report, error
from ppir.frontend.expand import DEFAULT_MAX_OPS, DEFAULT_MAX_STEPS
from ppir.frontend.loader import load_schedule
from ppir.ir import Schedule
from ppir.passes import LowerComms, OverlapComms
from ppir.passes.lower_comms import STRATEGIES
from ppir.passes.overlap import overlap_best

SCHEDULE_HELP = "a .pps file, a torch .csv schedule, or a built-in name (see 'ppir list')"


def add_schedule_arguments(
    p: argparse.ArgumentParser, lowering: bool = True, overlap: bool = False
) -> None:
    """SCHEDULE, -D, --placement, the expansion caps and (with ``lowering``) --lowering and
    --overlap/--no-overlap, whose default is ``overlap`` (on for the commands that time or run
    a schedule: compile, launch, viz)."""
    p.add_argument("schedule", metavar="SCHEDULE", help=SCHEDULE_HELP)
    p.add_argument(
        "-D",
        dest="defines",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a schedule parameter, e.g. -D P=4 -D M=8 (repeatable)",
    )
    p.add_argument(
        "--placement",
        metavar="R0,R1,...",
        help="for CSV schedules: the rank of each stage (default: inferred)",
    )
    p.add_argument(
        "--max-ops",
        type=int,
        default=DEFAULT_MAX_OPS,
        metavar="N",
        help=f"cap on expanded ops (default {DEFAULT_MAX_OPS:,})",
    )
    p.add_argument(
        "--max-steps",
        type=int,
        default=DEFAULT_MAX_STEPS,
        metavar="N",
        help=f"cap on loop iterations during expansion (default {DEFAULT_MAX_STEPS:,})",
    )
    if lowering:
        p.add_argument(
            "--lowering",
            choices=["auto", *STRATEGIES],
            default="auto",
            help="how communication is inserted: lockstep (exchange where both "
            "ranks are between ops), eager (exchange when the producer "
            "finishes, planned with the cost options' transfer times), naive "
            "(each recv right before its consumer; deadlocks 1F1B; never "
            "overlapped); default auto: lockstep, or with --overlap the faster "
            "of lockstep and eager under the cost options",
        )
        p.add_argument(
            "--overlap",
            action=argparse.BooleanOptionalAction,
            default=overlap,
            help="split each group's post from its wait (the overlap-comms pass) "
            f"so transfers overlap compute (default: {'on' if overlap else 'off'})",
        )


def add_planning_arguments(p: argparse.ArgumentParser) -> None:
    """The cost options that ``--lowering auto``/``eager`` plan exchange times with, for commands
    that have no cost backend of their own (check, dump, analyze, launch)."""
    from ppir.cli.cost_options import add_cost_arguments

    add_cost_arguments(
        p.add_argument_group(
            "overlap planning",
            "what --overlap plans exchange times with (as for 'ppir compile --backend cost'; "
            "a model shape can come from --config), e.g. --comm-latency 0.5: a message takes "
            "half a rank share's forward",
        ),
        model=False,
    )


def parse_defines(defines: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in defines:
        name, eq, value = d.partition("=")
        name = name.strip()
        if not eq or not name.isidentifier():
            raise error("bad-define", f"-D {d}: expected NAME=VALUE, e.g. -D P=4")
        try:
            out[name] = int(value.strip())
        except ValueError:
            msg = f"-D {d}: the value of '{name}' must be an integer, got {value!r}"
            raise error("bad-define", msg) from None
    return out


def parse_placement(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(x) for x in text.split(","))
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


def _lowered(args: argparse.Namespace, loaded: Schedule | None = None) -> tuple[Schedule, Schedule]:
    """(blocking, to run): the lowered schedule (literal lowered input kept as written), and
    the same after overlap-comms when --overlap asks for it (else the same object).
    ``loaded`` is the already expanded schedule, if the caller has it."""
    s = loaded if loaded is not None else load_from_args(args)
    if s.is_lowered:
        return s, s
    return lower_for_run(
        s, getattr(args, "lowering", "auto"), getattr(args, "overlap", False), args
    )


def lower_for_run(
    s: Schedule, strategy: str, overlap: bool, args: argparse.Namespace
) -> tuple[Schedule, Schedule]:
    """(blocking, to run) for compute-only ``s``: see ``--lowering``; ``eager`` and ``auto``
    plan with the cost options in ``args`` (the cost model's defaults when it has none).  The
    overlapped schedule is not verified here; :func:`lowered_and_report` does that."""
    costs = step_time = None
    if strategy == "eager" or (strategy == "auto" and overlap):
        from ppir.analysis.planning import planner
        from ppir.cli.cost_options import config_from_args, progress_from_args

        costs, step_time = planner(s, config_from_args(args), progress_from_args(args))
    chosen = "lockstep" if strategy == "auto" else strategy
    blocking = LowerComms(chosen, costs=costs if chosen == "eager" else None).apply(s)
    if not overlap or strategy == "naive":
        return blocking, blocking
    if strategy != "auto":
        return blocking, OverlapComms(verify=False).apply(blocking)
    return blocking, overlap_best(s, blocking, costs, step_time)


def lowered_and_report(
    args: argparse.Namespace, loaded: Schedule | None = None
) -> tuple[Schedule, Report | None]:
    """The schedule a command runs and its verification report (None with --no-verify).

    The overlapped schedule is verified; when it fails, the blocking one is returned with its
    own report, so that diagnostics describe the program the user wrote.  A valid schedule is
    verified once.
    """
    blocking, out = _lowered(args, loaded)
    if getattr(args, "no_verify", False):
        return out, None
    return _verified(blocking, out)


def _verified(blocking: Schedule, out: Schedule) -> tuple[Schedule, Report]:
    from ppir.verify import verify

    report = verify(out)
    if not report.ok and out is not blocking:
        out, report = blocking, verify(blocking)
    return out, report


def lowered_from_args(args: argparse.Namespace, loaded: Schedule | None = None) -> Schedule:
    """The schedule with communication, for commands that verify it themselves or not at all;
    overlapped (when asked for) only if it verifies, like :func:`lowered_and_report`."""
    blocking, out = _lowered(args, loaded)
    if out is blocking or getattr(args, "no_verify", False):
        return out
    return _verified(blocking, out)[0]


def print_report(report: Report) -> bool:
    """Print a verification report's diagnostics to stderr; True when it has no error."""
    for d in report.diagnostics:
        print(d.render(), file=sys.stderr)
    return report.ok


def emit_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2)
    sys.stdout.write("\n")
