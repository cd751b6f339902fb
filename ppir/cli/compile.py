"""ppir compile: lower a schedule and hand it to a backend (cost, cuda, ...)."""

from __future__ import annotations

import argparse
import sys

from ppir.cli.common import (
    add_compile_arguments,
    add_output_argument,
    add_schedule_arguments,
    compile_from_args,
    print_report,
)
from ppir.diagnostics import EXIT_INVALID
from ppir.plugins import available_backends, get_backend

NAME = "compile"
HELP = "compile a schedule for a backend: cost (estimate), cuda (execution plan), torch-csv"
DESCRIPTION = """Parse, expand, lower and verify a schedule, then run a backend on it.

Backends are found by name (built-ins, and plug-ins registered under the 'ppir.backends'
entry-point group):
  cost   time the schedule before it runs (step time, bubble, memory, traces, charts)
  cuda   write the per-rank execution plan that 'ppir.run' / 'ppir launch' execute

examples:
  ppir compile 1f1b -D P=4 -D M=8 --backend cost
  ppir compile interleaved_1f1b -D P=4 -D M=8 -D v=2 --backend cuda -o plan.json
"""


def add_arguments(p):
    add_schedule_arguments(p)
    p.add_argument(
        "--backend",
        default="cost",
        help="backend name (default cost); available: " + ", ".join(available_backends()),
    )
    add_output_argument(p, "where the backend writes its output")
    p.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="the cost backend's output: text (default) or json (ppir.estimate/1); the cuda "
        "and torch-csv backends write their own formats",
    )
    add_compile_arguments(p)
    for name in available_backends():
        try:
            backend = get_backend(name)
        except Exception:  # noqa: BLE001 - a broken plug-in must not break every command
            continue
        group = p.add_argument_group(f"{name} backend")
        try:
            backend.add_arguments(group)
        except argparse.ArgumentError as e:  # a plug-in reusing a taken flag: warn, go on
            print(f"ppir: warning: backend '{name}' options ignored: {e}", file=sys.stderr)


def run(args) -> int:
    backend = get_backend(args.backend)
    # e.g. torch's CSV: torch's runtime places its own waits, so groups stay blocking
    blocking = not getattr(backend, "runs_deferred_groups", True)
    compiled = compile_from_args(args, overlap=False if blocking else None)
    if compiled.report is not None and not print_report(compiled.report):
        return EXIT_INVALID
    return backend.run(compiled, args)
