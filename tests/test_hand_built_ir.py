"""Hand-built IR through the Python API (a new-user trial's findings): a Schedule of the wrong
shape is a ``bad-schedule`` ppir error naming the field, and the IR types check their fields
when built, instead of an IndexError, KeyError or StopIteration from deep inside."""

from __future__ import annotations

import pytest

import ppir
from ppir import Action, Group, OpKind, Overlap, Schedule, Wait
from ppir.ir import Reduce

F, B = OpKind.F, OpKind.B
GOOD = ((Action(0, F, 0), Action(0, B, 0)), (Action(1, F, 0), Action(1, B, 0)))


def _schedule(**fields) -> Schedule:
    base = dict(
        name="mine", params=(), ranks=2, stages=2, microbatches=1, placement=(0, 1), programs=GOOD
    )
    return Schedule(**{**base, **fields})


def test_a_well_formed_hand_built_schedule_compiles():
    assert ppir.compile(_schedule()).step_time == 6
    as_lists = _schedule(placement=[0, 1], programs=[list(p) for p in GOOD])
    assert ppir.compile(as_lists).ok  # sequences are accepted, as before


@pytest.mark.parametrize(
    "fields,message",
    [
        ({"placement": (0,)}, "Schedule.placement gives a rank for 1 stage, but the "
                              "schedule has 2 stages"),
        ({"placement": (0, 5)}, "Schedule.placement[1] is 5, not a rank in 0..1"),
        ({"placement": (0, "1")}, "Schedule.placement[1] is '1', not a rank in 0..1"),
        ({"placement": "01"}, "Schedule.placement is '01', but it needs one per stage"),
        ({"ranks": 3}, "Schedule.programs holds 2 programs, but it needs one per rank "
                       "(ranks is 3)"),
        ({"ranks": 0}, "Schedule.ranks must be an int of at least 1, got 0"),
        ({"stages": "2"}, "Schedule.stages must be an int of at least 1, got '2'"),
        ({"microbatches": 1.0}, "Schedule.microbatches must be an int of at least 0, got 1.0"),
        ({"microbatches": True}, "Schedule.microbatches must be an int of at least 0, got True"),
        ({"pipelines": 3}, "Schedule.pipelines (3) must divide the stages (2)"),
        ({"pipelines": 0}, "Schedule.pipelines must be an int of at least 1, got 0"),
        ({"params": {"P": 2}}, "Schedule.params must be (name, int) pairs, got {'P': 2}"),
        ({"params": (("P", "2"),)}, "Schedule.params must be (name, int) pairs"),
        ({"name": None}, "Schedule.name must be a str, got None"),
        ({"forward_only": 1}, "Schedule.forward_only must be True or False, got 1"),
        ({"programs": (GOOD[0], "1F0 1B0")}, "Schedule.programs[1] must be a tuple of items"),
        ({"programs": (GOOD[0], (GOOD[1][0], "1B0"))},
         "Schedule.programs[1][1] is str '1B0': an item is an Action, Group, Overlap, Wait or "
         "Reduce (Action.parse reads action text such as '2F0')"),
        ({"programs": ((Action(0, F, 0), Action(5, B, 0)), GOOD[1])},
         "Schedule.programs[0] holds 5B0, on stage 5: outside 0..1 (stages is 2)"),
        ({"programs": (GOOD[0], (Group((Action(-1, OpKind.RECV_F, 0),)), *GOOD[1]))},
         "Schedule.programs[1] holds [-1RECV_F0], on stage -1: outside 0..1"),
    ],
)  # fmt: skip
def test_compile_names_the_field_of_a_schedule_of_the_wrong_shape(fields, message):
    with pytest.raises(ppir.PpirError) as e:
        ppir.compile(_schedule(**fields))
    assert e.value.kind == "bad-schedule" and e.value.exit_code == 2
    assert e.value.message.startswith(message), e.value.message


@pytest.mark.parametrize("fn", ["verify", "estimate", "analyze", "graph", "to_pps", "to_json"])
def test_every_function_that_takes_a_schedule_checks_its_shape(fn):
    with pytest.raises(ppir.PpirError, match=r"Schedule\.placement gives a rank for 1 stage,"):
        getattr(ppir, fn)(_schedule(placement=(0,)))
    with pytest.raises(ppir.PpirError, match=r"Schedule\.programs holds 2 program"):
        ppir.lower(_schedule(ranks=3, placement=(0, 2)))


def test_actions_check_their_fields_when_built():
    assert Action(0, "F", 0) == Action(0, F, 0) and Action(0, "F", 0).kind is F  # its text
    assert Action(1, "SEND_F", 2).kind is OpKind.SEND_F
    with pytest.raises(ValueError, match=r"Action kind must be an OpKind \(F, B, I, W, SEND_F, "):
        Action(0, "X", 0)
    with pytest.raises(TypeError, match="Action kind must be an OpKind, got int 1"):
        Action(0, 1, 0)
    with pytest.raises(TypeError, match="Action stage must be an int, got str '0'"):
        Action("0", F, 0)
    with pytest.raises(TypeError, match="Action mb must be an int, got bool True"):
        Action(0, F, True)
    with pytest.raises(TypeError, match="Action mb must be an int, got float 1.0"):
        Action(0, F, 1.0)
    assert ppir.compile(_schedule(programs=((Action(0, "F", 0), Action(0, "B", 0)), GOOD[1]))).ok


def test_groups_waits_overlaps_and_reduces_check_what_they_hold():
    send = Action(0, OpKind.SEND_F, 0)
    assert Group([send]).actions == (send,) and hash(Group([send])) == hash(Group((send,)))
    with pytest.raises(TypeError, match="a Group holds Actions, got str '0SEND_F0'"):
        Group(("0SEND_F0",))
    with pytest.raises(TypeError, match="a Wait's actions must be a tuple of Actions, got int"):
        Wait(5)
    with pytest.raises(TypeError, match="an Overlap holds Actions, got str"):
        Overlap(("0F1", Action(1, B, 0)))
    with pytest.raises(TypeError, match="Reduce stage must be an int, got str '1'"):
        Reduce("1")


def test_compile_names_an_input_timeline_of_the_wrong_type():
    with pytest.raises(TypeError, match="input_timeline takes a Timeline or None, got 5"):
        ppir.compile(ppir.load("1f1b", P=2, M=2), input_timeline=5)
