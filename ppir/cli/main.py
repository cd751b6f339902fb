"""The ``ppir`` command line.  Each subcommand lives in :mod:`ppir.cli` (one module each,
with ``NAME``, ``HELP``, ``DESCRIPTION``, ``add_arguments(parser)`` and ``run(args) -> int``).

Exit codes: 0 fine, 1 the schedule is invalid, 2 unusable input or usage.  User mistakes are
printed as diagnostics, never as tracebacks.

This module imports nothing of ppir's at its top (nor does ``import ppir``): the console
script and ``python -m ppir`` reach :func:`main`, whose Ctrl-C handler then covers the imports
of the compiler, within a few tens of milliseconds of the interpreter's start.
"""

from __future__ import annotations

import argparse
import importlib
import keyword
import os
import re
import sys
from contextlib import contextmanager

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

A SCHEDULE is a .pps file, a torch.distributed.pipelining .csv file, a program that 'ppir dump
--format json' wrote, a built-in name, or torch:NAME (a torch.distributed.pipelining built-in,
e.g. torch:Interleaved1F1B -D v=2).
exit status: 0 ok, 1 invalid schedule, 2 unusable input or usage, 141 when the reader of
the output goes away (ppir dump X | head).
"""


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.commands: dict[str, argparse.ArgumentParser] = {}  # name -> its parser (top only)

    def error(self, message):  # usage errors exit 2 with a short message (argparse default)
        from ppir.diagnostics import EXIT_USAGE

        self.print_usage(sys.stderr)
        message += _closest_choice(message)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _closest_choice(message: str) -> str:
    """`` (did you mean 'launch'?)`` for argparse's "invalid choice: 'lanch' (choose from
    'list', ...)", a command's name or an option's value; "" otherwise."""
    from ppir.diagnostics import did_you_mean

    m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if m is None:
        return ""
    # quoted ('list', 'show') by older Pythons, bare (list, show) by later 3.12, 3.13 and 3.14
    listed = m.group(2)
    choices = re.findall(r"'([^']*)'", listed) or [c.strip() for c in listed.split(",")]
    hints = did_you_mean(m.group(1), choices)
    return f" ({hints[0]})" if hints else ""


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
        parser.commands[mod.NAME] = p
    return parser


def _unrecognized(parser: _Parser, argv: list[str], args, extra: list[str]) -> None:
    """Arguments no parser took: a usage error (exit 2) from the command they were given to
    (``ppir`` itself when they come before the command's name), with the closest of its
    options for a misspelt one."""
    from ppir.diagnostics import did_you_mean

    command = getattr(args, "command", None)
    sub = parser.commands.get(command or "", parser)
    if command in argv and argv.index(command) > argv.index(extra[0]):
        sub = parser
    message = f"unrecognized arguments: {' '.join(extra)}"
    # every option is in the usage line (none is suppressed); compared without the dashes,
    # which would make any two options look alike
    names = {o[2:] for o in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", sub.format_usage())}
    flags = [x.split("=", 1)[0][2:] for x in extra if x.startswith("--")]
    elsewhere = _taken_by_others(parser, command, flags[0]) if flags and sub is not parser else []
    hints = did_you_mean(flags[0], names) if flags and not elsewhere else []
    if elsewhere:  # a real option, of other commands: say whose (a near name would mislead)
        message += f" (--{flags[0]} is an option of {', '.join(elsewhere)}"
        if flags[0] == "model" and "config" in names:
            message += f"; '{sub.prog}' takes a model's shape from --config FILE's [model] table"
        message += ")"
    elif hints:
        hint = hints[0].replace("'", "'--", 1)  # did you mean '--x'?
        message += f" ({hint})"
    sub.error(message)


def _taken_by_others(parser: _Parser, command: str | None, flag: str) -> list[str]:
    """The other commands (``'ppir compile'``, ...) that take ``--flag``, as their usage lines
    show it (an option's first spelling: never a deprecated one)."""
    pattern = rf"(?<![\w-])--{re.escape(flag)}(?![\w-])"
    return [
        f"'ppir {name}'"
        for name, p in parser.commands.items()
        if name != command and re.search(pattern, p.format_usage())
    ]


INTERRUPTED = "ppir: interrupted"  # a Ctrl-C's one line (exit status 130)


def main(argv: list[str] | None = None) -> int:
    """The ``ppir`` command; a Ctrl-C from the start (building the parser imports every
    command) ends it with one line and exit status 130."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        return 130


def _main(argv: list[str] | None) -> int:
    with _exit_on_interrupt():  # importing the compiler and reading the arguments
        from ppir.diagnostics import EXIT_USAGE, PpirError
        from ppir.nogc import paused_gc

        parser = build_parser()
        argv = sys.argv[1:] if argv is None else list(argv)
        try:
            args, extra = parser.parse_known_args(argv)
        except PpirError as e:  # an option's value refused in ppir's words (argtypes)
            print(e.render(), file=sys.stderr)
            return e.exit_code
        if extra:
            _unrecognized(parser, argv, args, extra)
        if not getattr(args, "_run", None):
            parser.print_help()
            return EXIT_USAGE
        from ppir.torch.run import quiet_numpy_warning

        quiet_numpy_warning()  # before any command imports torch (launch, profile, import)
    real_stdout = sys.stdout
    if real_stdout is not None:
        sys.stdout = _GuardedStdout(real_stdout)
    try:
        with paused_gc():  # commands allocate millions of small objects: see ppir.nogc
            code = args._run(args)
        if sys.stdout is not None:
            sys.stdout.flush()  # a full disk or a closed pipe shows here, not at exit
        return code
    except PpirError as e:
        print(e.render(), file=sys.stderr)
        return e.exit_code
    except OSError as e:
        if isinstance(e, StdoutError) and isinstance(e.__cause__, BrokenPipeError):
            _detach_stdout()  # its reader has what it wanted ('ppir dump X | head'):
            return EXIT_PIPE  # quiet, as a command killed by SIGPIPE
        print(f"ppir: error: {io_error_message(e)}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if isinstance(sys.stdout, _GuardedStdout):
            sys.stdout = real_stdout


EXIT_PIPE = 128 + 13  # what a shell reports for a command killed by SIGPIPE


class StdoutError(OSError):
    """Writing to standard output failed (full disk, closed pipe, ...)."""


class _GuardedStdout:
    """Standard output that tags its write failures as :class:`StdoutError`; everything
    else is the wrapped stream's."""

    def __init__(self, stream):
        self._stream = stream

    CHUNK = 1 << 16

    def write(self, text):
        """In pieces of 64 KiB: one large write into a pipe whose reader left can end without
        an error (CPython's buffered writer takes the partial write, then loses the EPIPE of
        the rest), and 'ppir dump X | head' then exited 0 instead of 141."""
        try:
            if len(text) <= self.CHUNK:
                return self._stream.write(text)
            for i in range(0, len(text), self.CHUNK):
                self._stream.write(text[i : i + self.CHUNK])
            return len(text)
        except OSError as e:
            raise StdoutError(e.errno, e.strerror) from e

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        try:
            self._stream.flush()
        except OSError as e:
            raise StdoutError(e.errno, e.strerror) from e

    def __getattr__(self, name):
        return getattr(self._stream, name)


def io_error_message(e: OSError) -> str:
    """One line for an I/O failure: the path when the error names one, ``standard output``
    when that failed (its unwritten rest then goes to /dev/null, so that exiting cannot fail
    again), else the system's message."""
    why = e.strerror or str(e)
    if isinstance(e, StdoutError):
        _detach_stdout()
        return f"cannot write to standard output: {why}"
    if e.filename is not None:
        return f"cannot write {e.filename}: {why}"
    return f"input/output error: {why}"


@contextmanager
def _exit_on_interrupt():
    """Until the command runs, a Ctrl-C ends the process at once, with :data:`INTERRUPTED`
    and 130, from a signal handler: nothing there needs cleaning up, and a KeyboardInterrupt
    raised in the middle of the imports can stop being one (inside a descriptor's
    ``__set_name__``, as a dataclass is made, Python wraps it in a RuntimeError, shown with
    its traceback; Ctrl-C sent at random moments also had the process end by SIGINT after
    the line).  SIGINT is left alone where it is not Python's default handler (ignored in a
    background job, or a host program's own) and off the main thread."""
    import signal

    def stop(signum, frame):
        os.write(2, f"{INTERRUPTED}\n".encode())  # not sys.stderr: it may be mid-write
        os._exit(130)

    installed = False
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        try:
            signal.signal(signal.SIGINT, stop)
            installed = True
        except ValueError:  # not the main thread
            pass
    try:
        yield
    finally:
        if installed:
            signal.signal(signal.SIGINT, signal.default_int_handler)


def _detach_stdout() -> None:
    """Point file descriptor 1 at /dev/null (the interpreter flushes stdout at exit)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (e.g. captured in tests)
        pass


if __name__ == "__main__":
    sys.exit(main())
