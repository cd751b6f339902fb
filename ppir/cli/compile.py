"""ppir compile: lower a schedule and hand it to a backend (cost, cuda, ...)."""

from __future__ import annotations

import argparse
import os
import sys

from ppir.cli.common import (
    add_compile_arguments,
    add_output_argument,
    add_schedule_arguments,
    compile_from_args,
    print_report,
)
from ppir.cli.output import table
from ppir.cli.recording import RecordingGroup
from ppir.diagnostics import EXIT_INVALID, error
from ppir.plugins import available_backends, get_backend

NAME = "compile"
HELP = "compile a schedule for a backend: cost (estimate), cuda (execution plan), torch-csv"
DESCRIPTION = """Parse, expand, lower and verify a schedule, then run a backend on it.

Backends are found by name (built-ins, and plug-ins registered under the 'ppir.backends'
entry-point group); installed here:
{backends}
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
        help="the cost backend's output: text (default) or json (ppir.estimate/2); the cuda "
        "and torch-csv backends write their own formats",
    )
    add_compile_arguments(p)
    listed = []  # each installed backend and its own help line, for the description
    for name in available_backends():
        try:
            backend = get_backend(name)
        except Exception:  # noqa: BLE001 - a broken plug-in must not break every command
            listed.append([name, "(cannot be loaded)"])
            continue
        listed.append([name, getattr(backend, "help", "")])
        group = RecordingGroup(p.add_argument_group(f"{name} backend"))
        try:
            backend.add_arguments(group)
        except argparse.ArgumentError as e:  # a plug-in reusing a taken flag: warn, go on
            print(f"ppir: warning: backend '{name}' options ignored: {e}", file=sys.stderr)
        _BACKEND_OPTIONS[name] = group.actions
    lines = table(listed).splitlines() if listed else []
    p.description = DESCRIPTION.format(backends="".join(f"  {line}\n" for line in lines))


_BACKEND_OPTIONS: dict[str, list] = {}  # backend name -> the argparse actions it added


def _refuse_other_backends_options(args) -> None:
    """An option of another backend (``--plot`` with ``--backend cuda``) is a usage error: it
    would be silently ignored."""
    for name, actions in _BACKEND_OPTIONS.items():
        if name == args.backend:
            continue
        for action in actions:
            if getattr(args, action.dest, action.default) != action.default:
                raise error(
                    "bad-usage",
                    f"{action.option_strings[0]} is an option of the {name} backend, not of "
                    f"--backend {args.backend}",
                    hints=[f"ppir compile --backend {name} ... {action.option_strings[0]} ..."],
                )


# What --no-verify leaves each backend to do with a program that cannot run to its end (the
# cost backend times it, so it has nothing); a plug-in is handed the program.
_UNVERIFIED = {
    "cost": "the cost backend times it, so it stops here (ppir dump --no-verify still prints "
    "its programs)",
    "cuda": "ppir compile --no-verify still writes its execution plan",
    "torch-csv": "ppir compile --no-verify still writes its CSV",
}


def _unverified(backend: str) -> str:
    return _UNVERIFIED.get(
        backend, f"ppir compile --no-verify still hands it to the {backend} backend"
    )


# The built-in backends that write a format of their own, which --format does not choose
_OWN_FORMAT = {"cuda": "its execution plan (ppir.plan JSON)", "torch-csv": "torch's CSV"}


def _refuse_format_for_own_formats(args) -> None:
    """``--format json`` with a backend that writes its own format was silently ignored."""
    if args.format != "text" and args.backend in _OWN_FORMAT:
        raise error(
            "bad-usage",
            f"--format {args.format} chooses the cost backend's output; --backend "
            f"{args.backend} writes {_OWN_FORMAT[args.backend]}",
            hints=[f"drop --format, or use --backend cost --format {args.format}"],
        )


def _refuse_writing_an_input(args) -> None:
    """An output onto a file the command reads (``compile prog.json --backend cuda -o
    prog.json``) is a usage error: the schedule was replaced by the plan, the report or the
    trace, which no command then read as a schedule."""
    inputs = [(args.schedule, "SCHEDULE"), (getattr(args, "cost_config", None), "--config")]
    outputs = (("-o", "output"), ("--trace", "cost_trace"), ("--plot", "cost_plot"))
    given = [(flag, getattr(args, dest, None)) for flag, dest in outputs]
    given = [(flag, out) for flag, out in given if out]
    for i, (flag, out) in enumerate(given):  # two outputs into one file: one overwrites
        for other, path in given[:i]:
            if os.path.abspath(out) == os.path.abspath(path):
                raise error(
                    "bad-usage",
                    f"{other} {path} and {flag} {out} name one file: one would overwrite the other",
                    hints=["give each output its own file"],
                )
    for flag, out in given:
        for path, what in inputs:
            same = path and os.path.isfile(out) and os.path.isfile(path)
            if same and os.path.samefile(out, path):
                raise error(
                    "bad-usage",
                    f"{flag} {out}: that is the {what} this command reads; nothing written",
                    hints=["write the output to another file"],
                )


def run(args) -> int:
    backend = get_backend(args.backend)
    _refuse_other_backends_options(args)
    _refuse_writing_an_input(args)
    _refuse_format_for_own_formats(args)
    # e.g. torch's CSV: torch's runtime places its own waits, so groups stay blocking
    blocking = not getattr(backend, "runs_deferred_groups", True)
    compiled = compile_from_args(
        args, overlap=False if blocking else None, unverified=_unverified(args.backend)
    )
    if compiled.report is not None and not print_report(compiled.report):
        return EXIT_INVALID
    return backend.run(compiled, args)
