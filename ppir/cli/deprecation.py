"""Old flag spellings and meanings that keep working for one release, with a warning.

Contract
--------
* :class:`Renamed` is the argparse action of an option registered under its new spelling and
  its old ones together, so that either sets the same ``dest`` and ``required=True`` is met by
  either::

      p.add_argument("--module", "--model", dest="module", action=Renamed, old="--model",
                     required=True, metavar="MODULE", help="...")

  Given under an old spelling it stores exactly what the new one would and prints one line on
  stderr: ``ppir: warning: --model is deprecated: use --module (--model goes away in the next
  release)``.  Its help ends with ``(old spelling --model: deprecated)``.  Given under both its
  new and an old spelling in one command line, it is a usage error (which was meant?), unless
  it appends.  It stores a value
  (``nargs=None``, the default), appends one (``append=True``, like ``action="append"``) or
  sets True (``flag=True``, like ``action="store_true"``).  ``old`` must be among the option
  strings and at least one option string must be new.
* :func:`warn_deprecated` prints that one-line warning for a deprecated *use* that is not a
  spelling (e.g. ``--comm-latency`` read as microseconds because a model is given).
* :func:`old_spellings` gives an action's deprecated option strings (none for any other
  action): what the flag-vocabulary test leaves out when it compares meanings across commands.
"""

from __future__ import annotations

import argparse
import sys


def warn_deprecated(message: str) -> None:
    """One line on stderr: ``ppir: warning: MESSAGE``."""
    print(f"ppir: warning: {message}", file=sys.stderr)


class Renamed(argparse.Action):
    """An option with deprecated spellings (see the module docstring)."""

    def __init__(
        self,
        option_strings,
        dest,
        old=(),
        flag: bool = False,
        append: bool = False,
        help=None,
        **kw,
    ):
        old = (old,) if isinstance(old, str) else tuple(old)
        new = [o for o in option_strings if o not in old]
        if not old or any(o not in option_strings for o in old) or not new:
            raise ValueError(
                f"Renamed({option_strings}, old={old}): old spellings must be among the "
                "option strings, beside at least one new one"
            )
        if flag and append:
            raise ValueError("Renamed: flag=True and append=True exclude each other")
        self.old = old
        self.new = next((o for o in new if o.startswith("--")), new[0])
        self.flag, self.append = flag, append
        if flag:
            kw.update(nargs=0, const=True)
            kw.setdefault("default", False)
        if help is not None and help != argparse.SUPPRESS:
            help = f"{help} (old spelling {', '.join(old)}: deprecated)"
        super().__init__(option_strings, dest, help=help, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        seen = namespace.__dict__.setdefault("_renamed_spellings", {})
        given = seen.setdefault(self.dest, set())
        given.add(option_string in self.old)
        if len(given) > 1 and not self.append:  # the new and an old spelling: which one?
            parser.error(
                f"{_spellings(self.option_strings)} are one option under its new and old "
                f"spellings; give it once{_MODEL_NOTE if '--model' in self.old else ''}"
            )
        if option_string in self.old:
            warn_deprecated(
                f"{option_string} is deprecated: use {self.new} "
                f"({option_string} goes away in the next release)"
            )
        if self.flag:
            values = self.const
        elif self.append:
            values = [*(getattr(namespace, self.dest, None) or []), values]
        setattr(namespace, self.dest, values)


_MODEL_NOTE = (
    " (here --model is the old spelling of --module, the model module; the transformer shape "
    "that 'compile', 'analyze' and 'tune' take with --model comes in a --config file's [model] "
    "table)"
)


def old_spellings(action: argparse.Action) -> tuple[str, ...]:
    """The deprecated option strings of ``action`` (empty unless it is :class:`Renamed`)."""
    return action.old if isinstance(action, Renamed) else ()


def _spellings(options) -> str:
    """``-P, --pp and --ranks``; ``--module and --model``."""
    options = list(options)
    return options[0] if len(options) == 1 else f"{', '.join(options[:-1])} and {options[-1]}"
