"""ppir viz: an interactive timeline page (HTML) or a static chart (PNG, SVG, PDF) of a schedule."""

from __future__ import annotations

import argparse
import os
import re

from ppir.cli import common
from ppir.cli.argtypes import integer
from ppir.cli.common import (
    add_compile_arguments,
    add_output_argument,
    add_schedule_arguments,
    compile_from_args,
    parse_defines,
    print_report,
)
from ppir.diagnostics import EXIT_INVALID, error, write_output
from ppir.frontend.loader import declared_params, load_schedule

NAME = "viz"
HELP = "draw a schedule's timeline: interactive HTML page, or PNG / SVG / PDF"
DESCRIPTION = """Time a schedule with the cost model and draw it.

HTML (the default) is one self-contained file, no network needed: a global view (every rank a
row, ops coloured by kind and labelled with their microbatch, idle time in grey, messages as
arrows on demand), a local view (one rank: its ops, activation memory over time, the buffers it
holds), a static mode (the whole step) and a dynamic mode (play, pause, step and scrub through
time), hover details (start, end, what an op waited on) and the key figures in the header.
PNG, SVG and PDF draw the static Gantt chart with matplotlib (the 'viz' extra).

Compare two schedules, or one schedule with two parameter sets, on the same time axis with
--compare SCHEDULE2 and -D2 NAME=VALUE.  The second schedule inherits each -D value it declares
(so P and M carry over); -D2 overrides.  Without --compare, -D2 compares SCHEDULE with itself.
Cost options (--cost, --comm-latency, --model, ...) apply to both.

examples:
  ppir viz 1f1b -D P=4 -D M=8 -o 1f1b.html
  ppir viz 1f1b -D P=4 -D M=8 --compare interleaved_1f1b -D2 v=2 -o cmp.html
  ppir viz interleaved_1f1b -D P=4 -D M=8 -D v=2 -D2 v=4 -o v2_vs_v4.html
  ppir viz interleaved_1f1b -D P=4 -D M=8 -D v=2 --format png -o interleaved.png
  ppir viz 1f1b -D P=8 -D M=16 --comm-latency 0.2 --view local --rank 3 -o r3.html
"""

FORMATS = ("html", "png", "svg", "pdf")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_schedule_arguments(p)
    add_output_argument(p, "output file (default: SCHEDULE's name with the format's extension)")
    p.add_argument(
        "--format",
        choices=FORMATS,
        help="html (interactive, default), png, svg or pdf (static chart); default: from "
        "the -o extension",
    )
    cmp = p.add_argument_group("comparison")
    cmp.add_argument(
        "--compare",
        metavar="SCHEDULE2",
        help="a second schedule drawn below the first on the same time axis",
    )
    cmp.add_argument(
        "-D2",
        "--compare-define",
        dest="defines2",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a parameter of the second schedule (repeatable); overrides what it inherits from -D",
    )
    page = p.add_argument_group("page")
    page.add_argument(
        "--view",
        choices=("global", "local"),
        help="view the page opens in (default global; HTML only)",
    )
    page.add_argument(
        "--mode",
        choices=("static", "dynamic"),
        help="mode the page opens in (default static; HTML only)",
    )
    page.add_argument(
        "--rank", type=integer, metavar="R", help="rank of the local view (default 0; HTML only)"
    )
    add_compile_arguments(p)


def output_format(args) -> tuple[str, str]:
    """(format, path) from --format and -o: the extension decides when --format is absent, and
    must agree with it when both are given."""
    fmt, out = args.format, args.output
    if out:
        ext = os.path.splitext(out)[1].lower().lstrip(".")
        ext = "html" if ext == "htm" else ext
        if not fmt and ext not in FORMATS:
            raise error(
                "bad-usage",
                f"-o {out}: cannot tell the format from the extension",
                hints=["use .html, .png, .svg or .pdf, or pass --format"],
            )
        if fmt and ext in FORMATS and ext != fmt:
            raise error(
                "bad-usage",
                f"-o {out} names a .{ext} file but --format is {fmt}",
                hints=[f"drop --format (the extension decides), or write -o with .{fmt}"],
            )
        fmt = fmt or ext
    fmt = fmt or "html"
    if not out:  # torch:GPipe -> torch_GPipe.html: no character a file name cannot hold
        stem = os.path.splitext(os.path.basename(args.schedule))[0]
        out = f"{re.sub(r'[:*?<>|]', '_', stem) or 'schedule'}.{fmt}"
    return fmt, out


# a timeline is timed: what --no-verify leaves viz of a program that cannot run to its end
UNVERIFIED = (
    "ppir viz draws its timeline, so it stops here (ppir dump --no-verify still prints its "
    "programs)"
)


def second_schedule(args, first_params: dict | None = None):
    """The comparison schedule (lowered), or None without --compare / -D2.  It takes the
    values the first schedule was expanded with (``first_params``, its defaults included;
    else -D's) for the parameters it declares too, then -D2's: like with like."""
    if not args.compare and not args.defines2:
        return None
    spec = args.compare or args.schedule
    first = {**(first_params or {}), **parse_defines(args.defines)}
    own = parse_defines(args.defines2, "-D2")
    declared = declared_params(spec)
    inherited = {k: v for k, v in first.items() if k in declared}
    sched = load_schedule(
        spec,
        {**inherited, **own},
        max_ops=args.max_ops,
        max_steps=args.max_steps,
        define_flag="-D2",  # an unknown name can only be one of -D2's: -D's are filtered
    )
    # the same lowering and overlap: like with like
    return compile_from_args(args, sched, unverified=UNVERIFIED)


def page_only(args, fmt: str) -> None:
    """--view, --mode and --rank say how the HTML page opens; a chart (png, svg, pdf) is the
    static view of every rank, so giving them there is refused rather than ignored."""
    given = [
        f"{flag} {value}"
        for flag, value in (("--view", args.view), ("--mode", args.mode), ("--rank", args.rank))
        if value is not None
    ]
    if fmt != "html" and given:
        raise error(
            "bad-usage",
            f"{', '.join(given)}: {'sets' if len(given) == 1 else 'set'} how the HTML page "
            f"opens; {'an' if fmt == 'svg' else 'a'} {fmt} chart draws the whole step of every "
            "rank",
            hints=[f"drop {'it' if len(given) == 1 else 'them'}, or write HTML (-o NAME.html)"],
        )


def run(args) -> int:
    from ppir.viz import time_schedule

    fmt, out = output_format(args)
    page_only(args, fmt)
    if args.rank is None:
        args.rank = 0
    if args.rank < 0:
        raise error("bad-usage", f"--rank {args.rank}: must be 0 or more")
    compiled = [compile_from_args(args, unverified=UNVERIFIED)]
    other = second_schedule(args, dict(compiled[0].source.params))
    if other is not None:
        compiled.append(other)
    for c in compiled:
        if c.report is not None and not print_report(c.report):
            return EXIT_INVALID
    schedules = [c.program for c in compiled]
    ranks = max(s.ranks for s in schedules)
    if args.rank >= ranks:
        raise error("bad-usage", f"--rank {args.rank}: the schedule has ranks 0..{ranks - 1}")
    # drawing a large schedule takes as long as compiling it: its own line after the delay
    with common.compile_clock(f"viz {out}", args.quiet) as bar:
        bar.update(0, "memory")
        runs = [time_schedule(c) for c in compiled]
        bar.update(0, "page" if fmt == "html" else "chart")
        if fmt == "html":
            from ppir.viz import render_html

            opens = {"view": args.view or "global", "mode": args.mode or "static"}
            write_output(out, render_html(runs, {**opens, "rank": args.rank}))
        else:
            from ppir.viz import write_image

            write_image(runs, out, fmt)
    print(f"wrote {out}")
    return 0
