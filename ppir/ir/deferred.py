"""The deferred groups of a rank that no wait has named yet, keyed by their actions: what the
graph construction (:func:`ppir.ir.units.fifo_units`) and the wait check
(:mod:`ppir.verify.waits`) track while they walk a rank's program.

:class:`OpenGroups` behaves as a dict keyed by the actions tuple (equal actions are one key: a
later group with equal actions replaces the earlier one's value and keeps its place; a wait
takes the entry with equal actions, if any; values come in the dict's order), held in a short
list instead: a wait usually names the very tuple of its group (the passes share it), found by
identity before any :class:`~ppir.ir.Action` is hashed or compared.  Only a few groups are open
at once, so a scan costs less than hashing every action of every group and wait.
"""

from __future__ import annotations


class OpenGroups:
    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: list[list] = []  # [actions, value], in the dict's order

    def put(self, actions: tuple, value):
        """Set the value of ``actions``; the value it replaces, or None."""
        n = len(actions)
        mb = actions[0].mb if n else None  # equal tuples have equal first microbatches: a
        for e in self._entries:  # cheap test before the dataclass __eq__ of Actions
            k = e[0]
            if k is actions or (len(k) == n and (not n or k[0].mb == mb) and k == actions):
                old, e[1] = e[1], value
                return old
        self._entries.append([actions, value])
        return None

    def take(self, actions: tuple, default=None):
        """Remove the entry of ``actions`` and return its value (``default`` when none)."""
        entries = self._entries
        for i in range(len(entries) - 1, -1, -1):
            if entries[i][0] is actions:
                return entries.pop(i)[1]
        n = len(actions)
        mb = actions[0].mb if n else None
        for i, (k, v) in enumerate(entries):
            if len(k) == n and (not n or k[0].mb == mb) and k == actions:
                del entries[i]
                return v
        return default

    def values(self) -> list:
        return [v for _, v in self._entries]

    def __len__(self) -> int:
        return len(self._entries)
