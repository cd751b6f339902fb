"""The ``place-reduce`` pass: a ``REDUCE_GRAD`` per stage right after its last backward."""

from __future__ import annotations

from dataclasses import dataclass

from ppir.ir import Schedule
from ppir.ir.reduce import place_reduces
from ppir.ir.shape import require_schedule


@dataclass(frozen=True)
class PlaceReduce:
    """Put each stage's data-parallel gradient reduction (:class:`ppir.ir.Reduce`) right after
    its last B or W (:func:`ppir.ir.reduce.place_reduces`); a program that already places its
    reductions is left as it is.  Run it last: the output verifies whenever the input does
    (a reduce waits only for ops before it on its rank)."""

    name = "place-reduce"

    def apply(self, schedule: Schedule) -> Schedule:
        require_schedule(schedule, "PlaceReduce.apply")
        return place_reduces(schedule)
