"""ppir show: print a built-in schedule's .pps source (or torch:NAME's, as 'ppir import' does)."""

from __future__ import annotations

import sys

from ppir.cli.common import add_defines, parse_defines
from ppir.cli.output import add_quiet_argument
from ppir.diagnostics import EXIT_INVALID, error
from ppir.frontend.loader import load_schedule, read_source, schedule_kind

NAME = "show"
HELP = "print the .pps source of a built-in schedule (or of a file, or of torch:NAME)"
DESCRIPTION = """Print the .pps source of a built-in schedule, e.g. to copy it and make your own.

torch:NAME (one of torch.distributed.pipelining's classes, which have no .pps source) prints
the literal .pps that 'ppir import torch:NAME' prints, for -D P=.. -D M=.. -D v=.. (default
P=4, M=8), verified as 'ppir import' verifies it.

examples:
  ppir show 1f1b > my_1f1b.pps
  ppir show torch:Interleaved1F1B -D P=4 -D v=2
"""


def add_arguments(p):
    p.add_argument(
        "schedule",
        metavar="NAME",
        help="a built-in name (see 'ppir list'), a file, or torch:NAME",
    )
    add_defines(p, "torch:NAME parameters: P ranks, M microbatches, v stages per rank")
    add_quiet_argument(p)


def run(args) -> int:
    defines = parse_defines(args.defines)
    if args.schedule.startswith("torch:"):
        from ppir.cli.import_ import imported_pps

        text = imported_pps(args.schedule, defines, quiet=args.quiet, command="show")
        if text is None:
            return EXIT_INVALID
        sys.stdout.write(text)
        return 0
    if defines:
        if schedule_kind(args.schedule) != "pps":  # a CSV or JSON program: no parameters
            load_schedule(args.schedule, defines)  # the loader's error: it takes no -D
        raise error(
            "bad-usage",
            f"ppir show prints the source of {args.schedule}, which holds for every parameter "
            f"value; -D {args.defines[0]} applies to torch:NAME only",
            hints=[f"the program for given values: ppir dump {args.schedule} -D ..."],
        )
    _, text = read_source(args.schedule)
    print(text, end="" if text.endswith("\n") else "\n")
    return 0
