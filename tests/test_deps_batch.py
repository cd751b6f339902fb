"""The batch helpers of ppir.ir.deps are the per-op rules, applied in one loop."""

from __future__ import annotations

import itertools

import pytest

from ppir.ir import Action, OpKind, deps


def test_outgoing_messages_is_outgoing_message_of_each_action():
    placements = [(0, 1, 2, 3), (0, 1, 1, 0), (0, 1, 0, 1), (0, 0, 1, 1)]
    actions = [
        Action(s, k, m) for s, k, m in itertools.product(range(-2, 6), list(OpKind), range(2))
    ]
    checked = 0
    for place, pipelines, a in itertools.product(placements, (1, 2), actions):
        try:
            want = deps.outgoing_message(place, a, pipelines) if a.kind.is_compute else None
        except IndexError:  # a stage past the placement: both fail alike
            with pytest.raises(IndexError):
                deps.outgoing_messages(place, [a], pipelines)
            continue
        assert deps.outgoing_messages(place, [a], pipelines) == [want]
        checked += want is not None
    assert checked > 20


def test_payloads_is_payload_of_each_action():
    comm = [k for k in OpKind if k.is_comm]
    actions = [Action(s, k, m) for s, k, m in itertools.product(range(-1, 5), comm, range(3))]
    assert deps.payloads(actions) == [deps.payload(a) for a in actions]
    assert deps.payloads(actions[::-1]) == [deps.payload(a) for a in actions[::-1]]
