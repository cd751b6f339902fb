"""The first op holding each action key of a program: ``(stage, kind, mb) -> op id``, the
index :class:`ppir.ir.graph.ProgramGraph` keeps as ``first`` (the lowering, the local-order and
structure checks and the data edges look producers and consumers up in it).

It is a read-only :class:`~collections.abc.Mapping` whose keys come in the order of their
first op (what a dict filled by ``setdefault`` over the ops in order gives).  Keys with a stage
in ``0..stages-1`` and a microbatch in ``0..microbatches-1`` live in one flat integer array
(8 bytes a key, no tuple and no dict entry per op) when that array is no larger than a few
entries per op; the others (out of range: the verifier reports them) in a small dict.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping

from ppir.ir.types import Action, OpKind

_CODE = {k: i for i, k in enumerate(OpKind)}
_DENSE_PER_OP = 8  # the flat array is used while it holds at most this many entries per op


class FirstOps(Mapping):
    """``(stage, kind, mb) -> the first op holding it`` over ``ops`` (see the module
    docstring).  Fill it with :meth:`add` in op order, then read it."""

    __slots__ = ("_S", "_M", "_dense", "_other", "_ops", "_n")

    def __init__(self, ops: list[Action], stages: int, microbatches: int, expected: int):
        """``expected``: about how many ops will be added (sizes the flat array)."""
        self._S, self._M = stages, microbatches
        size = len(_CODE) * max(0, stages) * max(0, microbatches)
        self._dense = array("l", [-1]) * size if size <= _DENSE_PER_OP * max(expected, 1) else None
        self._other: dict[tuple, int] = {}
        self._ops = ops
        self._n = 0

    def add(self, actions, base: int) -> None:
        """Record ``actions``, the ops ``base``, ``base + 1``, ...: each key's first op wins."""
        dense, other, S, M, code = self._dense, self._other, self._S, self._M, _CODE
        if dense is None:
            setdefault = other.setdefault
            for o, a in enumerate(actions, base):
                setdefault((a.stage, a.kind, a.mb), o)
            self._n = len(other)
            return
        n = 0
        for o, a in enumerate(actions, base):
            st, m = a.stage, a.mb
            if 0 <= st < S and 0 <= m < M:
                i = (code[a.kind] * S + st) * M + m
                if dense[i] < 0:
                    dense[i] = o
                    n += 1
            elif (a.stage, a.kind, a.mb) not in other:
                other[(a.stage, a.kind, a.mb)] = o
                n += 1
        self._n += n

    def op(self, stage: int, kind: OpKind, mb: int) -> int | None:
        """The first op holding ``(stage, kind, mb)``, None when no op does."""
        dense = self._dense
        if dense is not None and 0 <= stage < self._S and 0 <= mb < self._M:
            o = dense[(_CODE[kind] * self._S + stage) * self._M + mb]
            return o if o >= 0 else None
        return self._other.get((stage, kind, mb))

    def get(self, key, default=None):
        o = self.op(*key) if type(key) is tuple and len(key) == 3 else None
        return default if o is None else o

    def __getitem__(self, key) -> int:
        o = self.get(key)
        if o is None:
            raise KeyError(key)
        return o

    def __contains__(self, key) -> bool:
        return self.get(key) is not None

    def __iter__(self) -> Iterator[tuple]:
        """The keys in the order of their first op."""
        return iter([key for key, _ in self.items()])

    def getter(self):
        """A function ``(stage, kind, mb) -> first op or None``: :meth:`op` with its state
        bound, for hot loops."""
        dense, other, S, M, code = self._dense, self._other, self._S, self._M, _CODE
        get = other.get
        if dense is None:
            return lambda st, k, m: get((st, k, m))

        def op(st: int, k: OpKind, m: int) -> int | None:
            if 0 <= st < S and 0 <= m < M:
                o = dense[(code[k] * S + st) * M + m]
                return o if o >= 0 else None
            return get((st, k, m))

        return op

    def items(self) -> list[tuple[tuple, int]]:
        """(key, first op) in the order of the first ops (a list, made in one pass)."""
        op = self.getter()
        out = []
        for o, a in enumerate(self._ops):
            st, k, m = a.stage, a.kind, a.mb
            if op(st, k, m) == o:
                out.append(((st, k, m), o))
        return out

    def __len__(self) -> int:
        return self._n
