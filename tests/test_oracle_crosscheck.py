"""The graph IR against ppir's former engines, kept as test oracles (tests/oracle/): the
work-list rendezvous run over program units and its timed twin.  On random programs --
random placements, split backward, fused F&B steps, both lowerings and the naive one,
deferred groups, and broken programs -- the verdicts and the step times must be identical:

* verdict: "every rank runs to the end under the rendezvous semantics" -- the graph's
  untimed timeline (acyclic wait-for graph) vs the oracle's work list, for both progress
  models (2,400 programs);
* step times: the graph's timeline vs the oracle's timed simulation, op by op, with random
  op durations per stage and random transfer times per link (1,200 programs).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.index import OpIndex
from oracle.programs import any_program, lowered_programs
from oracle.rendezvous import simulate as oracle_run
from oracle.timed import Tables
from oracle.timed import simulate as oracle_timed

from ppir.analysis.costs import Costs
from ppir.analysis.timeline import run
from ppir.diagnostics import PpirError
from ppir.ir import OpKind
from ppir.ir.graph import COMPUTE, build_graph
from ppir.verify import deadlock_free


@settings(max_examples=1200)
@given(any_program())
def test_fifo_verdicts_are_the_oracles(s):
    assert deadlock_free(s, "fifo") == oracle_run(OpIndex.build(s), "fifo").completed


@settings(max_examples=1200)
@given(any_program())
def test_relaxed_verdicts_are_the_oracles(s):
    assert deadlock_free(s, "relaxed") == oracle_run(OpIndex.build(s), "relaxed").completed


@st.composite
def _costs(draw, s):
    kinds = (OpKind.F, OpKind.B, OpKind.I, OpKind.W)
    op = tuple({k: draw(st.integers(1, 5)) for k in kinds} for _ in range(s.stages))
    pairs = tuple(
        ((a, b), draw(st.integers(0, 3))) for a in range(s.ranks) for b in range(s.ranks) if a != b
    )
    ratio = draw(st.sampled_from([None, 1, 2]))
    return Costs(op, pairs=pairs, overlap=None if ratio is None else ratio)


def _timings(s, costs, progress):
    g = build_graph(s, progress)
    tl = run(g, costs)
    ours = sorted(
        (g.rank[v], g.ops[g.lo[v]].key, tl.start[v], tl.finish[v])
        for v in range(g.n)
        if g.kind[v] == COMPUTE
    )
    return tl, ours


@settings(max_examples=600)
@given(lowered_programs(broken=False), st.sampled_from(["fifo", "relaxed"]), st.data())
def test_step_times_are_the_oracles(s, progress, data):
    costs = data.draw(_costs(s))
    tl, ours = _timings(s, costs, progress)
    if not tl.complete:  # a naive lowering that deadlocks: the oracle gets stuck too
        with pytest.raises(PpirError):
            oracle_timed(s, Tables(costs, s.ranks), progress)
        return
    ref = oracle_timed(s, Tables(costs, s.ranks), progress)
    assert tl.makespan == max(ref.finish, default=0)
    # every compute unit starts and ends when the oracle says (its first action's interval)
    theirs = {}
    for r, row in enumerate(ref.ops):
        for o in row:
            theirs.setdefault((r, o.action.key), o)
    g = build_graph(s, progress)
    for r, key, start, _ in ours:
        assert theirs[(r, key)].start == start
    transfers = sorted((t.src, t.dst, t.start, t.end) for t in ref.transfers)
    mine = sorted(
        (g.op_rank[g.lo[m]], g.op_rank[g.hi[m]], tl.start[m], tl.finish[m]) for m in g.messages
    )
    assert mine == transfers


@settings(max_examples=600)
@given(lowered_programs(broken=False), st.data())
def test_free_overlapped_steps_time_like_the_oracle_with_unit_costs(s, data):
    """The default textbook costs (F=1, B=2, I=W=1 per chunk), free links: the estimator's
    figure is the oracle's."""
    ones = Costs(
        tuple({OpKind.F: 1, OpKind.B: 2, OpKind.I: 1, OpKind.W: 1} for _ in range(s.stages))
    )
    tl, _ = _timings(s, ones, "fifo")
    if tl.complete:
        ref = oracle_timed(s, Tables(ones, s.ranks), "fifo")
        assert tl.makespan == max(ref.finish, default=0)
