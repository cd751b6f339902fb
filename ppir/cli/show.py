"""ppir show: print a built-in schedule's .pps source."""

from __future__ import annotations

from ppir.frontend.loader import read_source

NAME = "show"
HELP = "print the .pps source of a built-in schedule (or of a file)"
DESCRIPTION = """Print the .pps source of a built-in schedule, e.g. to copy it and make your own.

example:
  ppir show 1f1b > my_1f1b.pps
"""


def add_arguments(p):
    p.add_argument("schedule", metavar="NAME", help="a built-in name (see 'ppir list') or a file")


def run(args) -> int:
    _, text = read_source(args.schedule)
    print(text, end="" if text.endswith("\n") else "\n")
    return 0
