"""The ``ppir`` command line.  Each subcommand lives in :mod:`ppir.cli` (one module each,
with ``NAME``, ``HELP``, ``DESCRIPTION``, ``add_arguments(parser)`` and ``run(args) -> int``).

Exit codes: 0 fine, 1 the schedule is invalid, 2 unusable input or usage.  User mistakes are
printed as diagnostics, never as tracebacks.
"""

from __future__ import annotations

import argparse
import importlib
import keyword
import sys

from ppir.diagnostics import EXIT_USAGE, PpirError
from ppir.nogc import paused_gc

# Order here is the order in `ppir --help`.
COMMAND_MODULES = [
    "list",
    "show",
    "check",
    "dump",
    "compile",
    "analyze",
    "sweep",
    "tune",
    "profile",
    "launch",
    "import",
    "viz",
    "fuzz",
    "synth",
]

EPILOG = """\
examples:
  ppir list                                   the built-in schedules and their parameters
  ppir show interleaved_1f1b                  print a built-in's .pps source
  ppir check 1f1b -D P=4 -D M=8               parse, expand, lower and verify
  ppir dump interleaved_1f1b -D P=4 -D v=2    print the lowered per-rank programs
  ppir compile 1f1b --backend cost            estimate step time and bubble

A SCHEDULE is a .pps file, a torch.distributed.pipelining .csv file, a built-in name, or
torch:NAME (a torch.distributed.pipelining built-in, e.g. torch:Interleaved1F1B -D v=2).
exit status: 0 ok, 1 invalid schedule, 2 unusable input or usage.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors exit 2 with a short message (argparse default)
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _commands():
    for name in COMMAND_MODULES:
        module = name.replace("-", "_")
        module += "_" if keyword.iskeyword(module) else ""  # `import` lives in import_.py
        yield importlib.import_module(f"ppir.cli.{module}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ppir",
        description="ppir: a compiler for pipeline-parallel training schedules. Write a "
        "schedule once in .pps, prove it deadlock-free, measure it, and run it.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from ppir import __version__

    parser.add_argument("--version", action="version", version=f"ppir {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in _commands():
        p = sub.add_parser(
            mod.NAME,
            help=mod.HELP,
            description=mod.DESCRIPTION,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        with paused_gc():  # commands allocate millions of small objects: see ppir.nogc
            return args._run(args)
    except PpirError as e:
        print(e.render(), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("ppir: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
