"""ppir dump: print the lowered per-rank programs."""

from __future__ import annotations

from ppir.cli.common import (
    add_planning_arguments,
    add_schedule_arguments,
    emit_json,
    load_from_args,
    lowered_from_args,
)
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
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument(
        "--compute-only", action="store_true", help="leave the communication actions out"
    )
    add_planning_arguments(p)


def run(args) -> int:
    s = load_from_args(args) if args.compute_only else lowered_from_args(args)
    if args.compute_only:
        s = s.compute_only()
    if args.format == "json":
        emit_json(to_json(s))
    else:
        print(format_pps(s), end="")
    return 0
