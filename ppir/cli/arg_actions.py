"""argparse actions for options given more than once: refused (:class:`Once`) or joined into one
list (:class:`Joined`)."""

from __future__ import annotations

import argparse


class Once(argparse.Action):
    """Store an option's value; a second use is a usage error naming both values and saying
    why (``twice=``), instead of the last one silently winning."""

    def __init__(self, *args, twice: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.twice = twice

    def __call__(self, parser, namespace, values, option_string=None):
        before = getattr(namespace, self.dest, None)
        if before is not None:
            raise argparse.ArgumentError(self, f"given twice ({before}, {values}); {self.twice}")
        setattr(namespace, self.dest, values)


class Joined(argparse.Action):
    """A ``K=X,...`` option given more than once reads as one list (``--cost F=1 --cost B=3`` is
    ``--cost F=1,B=3``), as ``-D`` does, so a key given twice with two values is refused there
    instead of the last option silently dropping the first's keys."""

    def __call__(self, parser, namespace, values, option_string=None):
        before = getattr(namespace, self.dest, None)
        if before is None:
            joined = values
        elif not before.strip() or not values.strip():  # an empty one is refused, as alone
            joined = ""
        else:  # each option may end with a comma, as one alone may
            joined = f"{before.rstrip().removesuffix(',')},{values}"
        setattr(namespace, self.dest, joined)
