"""The deferred groups of a rank that no wait has named yet, keyed by their actions: what the
graph construction (:func:`ppir.ir.units.fifo_units`) and the wait check (:mod:`ppir.verify.waits`,
whose result the local-order check reads) track while they walk a rank's program: the one rule
of which wait takes which deferred group.

:class:`OpenGroups` behaves as a dict keyed by the actions tuple (equal actions are one key: a
later group with equal actions replaces the earlier one's value and keeps its place; a wait
takes the entry with equal actions, if any; values come in the dict's order), held in a dict
keyed by the identity of each entry's own tuple instead: a wait usually names the very tuple of
its group (the passes share it), found there before any :class:`~ppir.ir.Action` is hashed or
compared (an entry holds its tuple, so the identity is not reused while it is open).  Only a
few groups are open at once, so a scan for an equal tuple costs less than hashing every action
of every group and wait; once more than a few are open (a program that posts far ahead), they
are indexed by their actions as a dict would, so no program pays a scan per group over all its
open groups.
"""

from __future__ import annotations


class OpenGroups:
    __slots__ = ("_entries", "_index")

    SCAN = 16  # open groups searched by a scan; beyond that, through the index

    def __init__(self) -> None:
        self._entries: dict[int, list] = {}  # id(its actions) -> [actions, value], dict order
        self._index: dict[tuple, list] | None = None  # actions -> entry, past SCAN entries

    def _find(self, actions: tuple) -> list | None:
        """The entry whose actions equal ``actions`` (at most one: ``put`` replaces), found
        by value (the caller has looked the very tuple up already)."""
        if self._index is not None:
            return self._index.get(actions)
        n = len(actions)
        mb = actions[0].mb if n else None  # equal tuples have equal first microbatches: a
        for e in self._entries.values():  # cheap test before the dataclass __eq__ of Actions
            k = e[0]
            if len(k) == n and (not n or k[0].mb == mb) and k == actions:
                return e
        return None

    def put(self, actions: tuple, value):
        """Set the value of ``actions``; the value it replaces, or None."""
        entries = self._entries
        if entries:
            e = entries.get(id(actions))
            if e is None:
                e = self._find(actions)
            if e is not None:
                old, e[1] = e[1], value
                return old
        e = entries[id(actions)] = [actions, value]
        if self._index is not None:
            self._index[actions] = e
        elif len(entries) > self.SCAN:
            self._index = {en[0]: en for en in entries.values()}
        return None

    def take(self, actions: tuple, default=None):
        """Remove the entry of ``actions`` and return its value (``default`` when none)."""
        e = self._entries.pop(id(actions), None)
        if e is None:
            e = self._find(actions)
            if e is None:
                return default
            del self._entries[id(e[0])]
        if self._index is not None:
            del self._index[e[0]]
        return e[1]

    def values(self) -> list:
        return [e[1] for e in self._entries.values()]

    def __len__(self) -> int:
        return len(self._entries)
