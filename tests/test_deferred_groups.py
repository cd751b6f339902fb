"""The table of deferred groups not yet waited for (:class:`ppir.ir.deferred.OpenGroups`, read
by the graph construction and the wait check) behaves as the dict keyed by a group's actions
that it replaces: a later group with equal actions replaces the earlier one's value in its
place, a wait takes the group with equal actions (identical tuple or not) or none, and the
values come in the dict's order, whether it scans or has indexed its entries."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppir.ir import Action, OpKind
from ppir.ir.deferred import OpenGroups

KEYS = [
    tuple(Action(s, k, m) for s, k, m in key)
    for key in (
        ((0, OpKind.SEND_F, 0),),
        ((0, OpKind.SEND_F, 1),),
        ((0, OpKind.SEND_F, 0), (1, OpKind.RECV_B, 0)),
        ((1, OpKind.RECV_B, 0), (0, OpKind.SEND_F, 0)),
        ((1, OpKind.SEND_F, 0),),
        (),
    )
]
steps = st.lists(
    st.tuples(st.booleans(), st.integers(0, len(KEYS) - 1), st.booleans()), max_size=30
)


class IndexedEarly(OpenGroups):
    """Past one open group through the index (what a program posting far ahead reaches)."""

    SCAN = 1


@pytest.mark.parametrize("table_type", [OpenGroups, IndexedEarly])
@settings(max_examples=300, deadline=None)
@given(steps)
def test_put_and_take_are_the_dict(table_type, ops):
    table = table_type()
    ref: dict = {}
    for v, (is_group, i, fresh) in enumerate(ops):
        # fresh: an equal tuple of equal (not identical) actions, as a parsed wait holds
        key = tuple(a.with_span(None) for a in KEYS[i]) if fresh else KEYS[i]
        if is_group:
            assert table.put(key, v) == ref.get(key)
            ref[key] = v
        else:
            assert table.take(key, -1) == ref.pop(key, -1)
        assert table.values() == list(ref.values()) and len(table) == len(ref)


def test_many_open_groups_are_indexed():
    table = OpenGroups()
    keys = [(Action(0, OpKind.SEND_F, m),) for m in range(3 * OpenGroups.SCAN)]
    for v, k in enumerate(keys):
        table.put(k, v)
    assert table._index is not None and len(table._index) == len(keys)
    fresh = tuple(a.with_span(None) for a in keys[5])
    assert table.take(fresh) == 5 and table.take(keys[5], -1) == -1
    assert table.values() == [v for v in range(len(keys)) if v != 5]
