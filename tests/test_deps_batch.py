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


@pytest.mark.parametrize("stages, pipelines", [(1, 1), (4, 1), (4, 2), (6, 3), (8, 2)])
def test_per_program_tables_are_the_per_op_rules(stages, pipelines):
    """input_table, crossing_table and peer_table hold, for every (kind, stage) in range,
    what inputs, message_in / recv_key and peer_stage / peer_rank say of each op."""
    tables = (
        deps.input_table(stages, pipelines),
        deps.crossing_table(stages, pipelines),
        deps.peer_table(stages, pipelines),
    )
    identity = tuple(range(stages))  # one stage per rank: peer_rank is the peer stage
    entries = 0
    for s, k, m in itertools.product(range(-1, stages + 1), list(OpKind), (0, 3)):
        a, key = Action(s, k, m), (k, s)
        in_range = 0 <= s < stages
        if k.is_compute:
            want = deps.inputs(a, stages, pipelines)
            got = tables[0].get(key)
            assert got == (tuple((p.stage, p.kinds) for p in want) if in_range else None)
            msg = deps.message_in(a, stages, pipelines)
            got = tables[1].get(key)
            if msg is None or not in_range:
                assert got is None
            else:
                assert got[:2] == (msg.src, msg.grad)
                assert (s, got[2], m) == deps.recv_key(a, stages, pipelines)
                assert deps.recv_action(msg).key == (s, got[2], m)
        elif k.is_comm:
            got = tables[2].get(key)
            peer = deps.peer_rank(identity, a, pipelines) if in_range else -1
            assert (-1 if got is None else got) == peer
        entries += key in tables[0] or key in tables[1] or key in tables[2]
    assert entries > stages
