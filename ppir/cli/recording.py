"""An argparse argument group that remembers the actions added to it, so that a command can
tell which of its options came from one group (``compile``: which options belong to which
backend; ``tune``: which cost options to pass on to a row's ``ppir compile`` command) without
reading argparse's private attributes."""

from __future__ import annotations


class RecordingGroup:
    """``group`` (an argparse argument group) that records each action added to it in
    :attr:`actions`; everything else is the group's own."""

    def __init__(self, group):
        self._group = group
        self.actions: list = []

    def add_argument(self, *args, **kwargs):
        action = self._group.add_argument(*args, **kwargs)
        self.actions.append(action)
        return action

    def __getattr__(self, name):
        return getattr(self._group, name)
