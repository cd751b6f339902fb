"""ppir dump: print the lowered per-rank programs."""

from __future__ import annotations

from ppir.cli.common import (
    add_compile_arguments,
    add_schedule_arguments,
    compile_from_args,
    emit_json,
    load_from_args,
    print_report,
)
from ppir.diagnostics import EXIT_INVALID
from ppir.ir.printer import format_pps, to_json

NAME = "dump"
HELP = "print the lowered per-rank programs (text or JSON)"
DESCRIPTION = """Parse, expand and lower a schedule, then print its per-rank programs.

The text form is literal .pps (it parses back to the same IR); communication actions posted
together sit in square brackets.  --format json prints the versioned ppir.program/1 object.

examples:
  ppir dump 1f1b -D P=2 -D M=4
  ppir dump interleaved_1f1b -D P=4 -D M=8 -D v=2 --format json
  ppir dump my.pps --compute-only
"""


def add_arguments(p):
    add_schedule_arguments(p)
    p.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="text (default): the program as re-parseable .pps; json: a ppir.program/1 file "
        "that every command reads back",
    )
    p.add_argument(
        "--compute-only", action="store_true", help="leave the communication actions out"
    )
    add_compile_arguments(p, model=False)


def run(args) -> int:
    if args.compute_only:
        s = load_from_args(args).compute_only()
    else:
        c = compile_from_args(args, unverified="ppir dump --no-verify still prints its programs")
        if c.report is not None and not print_report(c.report):
            return EXIT_INVALID
        s = c.program
    if args.format == "json":
        emit_json(to_json(s))
    else:
        print(format_pps(s), end="")
    return 0
