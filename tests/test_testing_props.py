"""ppir's own properties on the schedules ppir.testing generates.

* valid_schedules() only produces complete, acyclic schedules (and honours its memory cap);
* lowering preserves every rank's multiset of compute ops and leaves the IR valid: the verifier
  accepts the lockstep lowering of every random valid schedule;
* mutations() edit exactly one rank's order, and the lockstep pipeline verifies a mutant
  exactly when its compute order is acyclic;
* JSON round trips of random lowered schedules: the IR's ppir.program/1 and the cuda backend's
  ppir.plan/1 (save_plan/load_plan).

The estimator's lower bounds are tested in test_cost.py and the verifier against a naive
interpreter in test_verify_props.py; they are not repeated here.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppir.analysis.memory import analyze_memory
from ppir.analysis.timeline import run
from ppir.frontend.loader import load_schedule
from ppir.ir import OpKind
from ppir.ir.graph import build_graph
from ppir.ir.printer import from_json, to_json
from ppir.passes import LowerComms
from ppir.testing import check_schedule, mutations, valid_schedules
from ppir.verify import verify

SMALL = {"P": "1..4", "M": "1..4", "v": "1..2"}


def _compute_multiset(s):
    return [Counter(s.compute_actions(r)) for r in range(s.ranks)]


@pytest.mark.parametrize("placement", ["looped", "vshape", "random"])
@settings(max_examples=60)
@given(data=st.data())
def test_lowering_preserves_compute_ops_and_verifies(placement, data):
    s = data.draw(valid_schedules(**SMALL, placement=placement, split_backward=None))
    S, M = s.stages, s.microbatches
    keys = Counter(
        (a.stage, a.mb)
        for r in range(s.ranks)
        for a in s.compute_actions(r)
        if a.kind in (OpKind.F, OpKind.B, OpKind.I)
    )
    assert keys == Counter({(st_, m): 2 for st_ in range(S) for m in range(M)})
    assert run(build_graph(s)).complete  # acyclic compute order
    for strategy in ("lockstep", "naive"):
        low = LowerComms(strategy).apply(s)
        assert _compute_multiset(low) == _compute_multiset(s)
        assert [low.compute_actions(r) for r in range(s.ranks)] == [
            s.compute_actions(r) for r in range(s.ranks)
        ]
    report = verify(LowerComms("lockstep").apply(s))
    assert report.ok, "\n".join(d.render() for d in report.errors)


@settings(max_examples=60)
@given(valid_schedules(P="1..4", M="1..5", v="1..2", max_in_flight=2, split_backward=None))
def test_memory_cap_is_honoured(s):
    mem = analyze_memory(s, i_fraction=0)  # I frees nothing: a chunk lives until B or W
    assert all(m.peak_chunks <= 2 for m in mem.per_rank)


def test_an_impossible_cap_is_rejected_not_returned():
    """v = 2 chunks on one rank with a cap of 1: no linear extension fits.  Said at once when
    every v is too many; with a range of v, the draws that cannot fit are rejected."""
    with pytest.raises(ValueError, match="max_in_flight=1 cannot hold the 2 chunks"):
        valid_schedules(P=1, M=1, v=2, max_in_flight=1)
    seen = []

    @settings(max_examples=20, database=None)
    @given(valid_schedules(P=1, M=2, v="1..2", max_in_flight=1))
    def fits(s):
        seen.append(s.stages // s.ranks)

    fits()
    assert seen and set(seen) == {1}


def test_a_tight_cap_still_draws_schedules():
    """V-shaped, P=3, v=2 under a cap of 2: a random order almost always gets stuck (a second
    microbatch's forward on stage 0 leaves no room for the first one's return to the rank);
    the draws fall back to pacing the microbatches, so hypothesis gets schedules, not a failed
    health check."""
    drawn = []

    @settings(max_examples=30, database=None)
    @given(valid_schedules(P=3, M=4, v=2, placement="vshape", max_in_flight=2))
    def capped(s):
        mem = analyze_memory(s, i_fraction=0)
        assert all(m.peak_chunks <= 2 for m in mem.per_rank)
        drawn.append(s)

    capped()
    assert len(drawn) == 30


@settings(max_examples=100)
@given(
    st.sampled_from([("1f1b", {"P": 3, "M": 4}), ("interleaved_1f1b", {"P": 2, "M": 2, "v": 2})]),
    st.data(),
)
def test_mutants_verify_exactly_when_acyclic(case, data):
    name, params = case
    s = load_schedule(name, params)
    mutant = data.draw(mutations(s, max_mutations=2))
    assert _compute_multiset(mutant) == _compute_multiset(s)
    acyclic = run(build_graph(mutant)).complete
    assert check_schedule(mutant).ok == acyclic


@settings(max_examples=50)
@given(mutations(LowerComms().apply(load_schedule("1f1b", {"P": 2, "M": 2}))))
def test_mutations_of_lowered_schedules_change_one_program(mutant):
    orig = LowerComms().apply(load_schedule("1f1b", {"P": 2, "M": 2}))
    changed = [r for r in range(orig.ranks) if orig.programs[r] != mutant.programs[r]]
    assert len(changed) == 1
    assert Counter(mutant.programs[changed[0]]) == Counter(orig.programs[changed[0]])


@settings(max_examples=40)
@given(s=valid_schedules(**SMALL, placement="random", split_backward=None))
def test_json_program_and_plan_round_trips(s, tmp_path_factory):
    from ppir.ir.reduce import place_reduces
    from ppir.plan import build_plan, load_plan, plan_schedule, save_plan

    low = LowerComms().apply(s)
    assert from_json(json.loads(json.dumps(to_json(low)))) == low
    plan = build_plan(low)
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    save_plan(plan, path)
    assert load_plan(path) == plan  # validated: rebuilt from its IR, verified, digest checked
    assert plan_schedule(plan) == place_reduces(low)  # the default reductions made explicit
