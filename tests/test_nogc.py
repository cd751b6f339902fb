"""ppir.nogc: the collector is paused inside, resumes after, and what was made during the pause
is neither walked by a young collection on resuming nor kept from a full one."""

from __future__ import annotations

import gc
import weakref

import pytest

from ppir.nogc import paused_gc, without_gc


class Node:
    pass


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_inside_and_resumed_after_even_when_nested(collector_on):
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()


def test_a_collector_off_before_stays_off():
    was = gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


def test_objects_made_in_the_pause_do_not_start_a_young_collection(collector_on):
    @without_gc
    def build():
        return [[i] for i in range(200_000)]  # 200,000 tracked containers

    started = []

    def seen(phase, info):
        if phase == "start":
            started.append(info["generation"])

    gc.callbacks.append(seen)  # nothing collects during the pause: any start is after it
    try:
        kept = build()
        # Without the move, generation 0 counts all 200,001 of them and the first allocation
        # after the pause starts a collection that walks them all.
        more = [[i] for i in range(100)]
    finally:
        gc.callbacks.remove(seen)
    assert started == []
    assert len(kept) == 200_000 and len(more) == 100


def test_a_cycle_made_in_the_pause_is_freed_by_a_full_collection(collector_on):
    with paused_gc():
        a, b = Node(), Node()
        a.other, b.other = b, a
        ref = weakref.ref(a)
        del a, b
        many = [[i] for i in range(200_000)]  # enough to be moved unscanned
    assert ref() is not None  # nothing collected it during the pause
    assert gc.get_count()[0] < 1000 and len(many) == 200_000  # moved: the cycle waits
    gc.collect()
    assert ref() is None


def test_the_process_own_frozen_objects_stay_frozen(collector_on):
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with paused_gc():
            made = [[i] for i in range(200_000)]  # enough to be moved, were nothing frozen
        assert gc.get_freeze_count() == frozen  # theirs still frozen, the pause's left young
        assert len(made) == 200_000
    finally:
        gc.unfreeze()


def test_a_small_pause_leaves_the_generations_as_they_are(collector_on):
    """Only a pause that made many objects moves them: a small compile in a user's process
    does not promote the process's young objects past the young collections."""
    gc.collect()
    with paused_gc():
        made = [[i] for i in range(100)]
    assert gc.get_count()[0] >= 100  # still young: nothing was moved
    assert len(made) == 100
