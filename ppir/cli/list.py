"""ppir list: the built-in schedules and their parameters."""

from __future__ import annotations

from ppir.cli.output import table
from ppir.frontend.loader import read_source
from ppir.frontend.parser import parse_text
from ppir.schedules import builtin_names

NAME = "list"
HELP = "list the built-in schedules and their parameters"
DESCRIPTION = """List the built-in schedules (each a .pps file shipped with ppir) with their
parameters and defaults.  Use any of them wherever a SCHEDULE is asked for.

columns: the name; its parameters with their defaults, each set with -D NAME=VALUE (P the
pipeline ranks, M the microbatches of a step, v the chunks (stages) per rank, N the
microbatches per group of the interleaved orders; a default may be an expression of the
others, N=P); the first line of its source: the schedule and where it is published.
'ppir show NAME' prints the whole source, 'ppir check NAME -D P=8' verifies it at a size.

example:
  ppir list
"""


def add_arguments(p):
    pass


def run(args) -> int:
    rows = []
    for name in builtin_names():
        path, text = read_source(name)
        mod = parse_text(text, path)
        params = ", ".join(
            f"{p.name}={p.default_text}" if p.default_text is not None else p.name
            for p in (mod.header.params if mod.header else ())
        )
        first = next((ln[1:].strip() for ln in text.splitlines() if ln.startswith("#")), "")
        first = first.split(": ")[0].rstrip(".")
        rows.append((name, params, first))
    print(table(rows))
    return 0
