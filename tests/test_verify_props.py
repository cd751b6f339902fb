"""Property tests: the verifier's deadlock verdict against a deliberately naive interpreter.

``naive_completes`` below shares no code with ppir.verify: it steps every rank round-robin over
its program items, lets an op in a rank's current item meet an op in the peer's current item
when they are the k-th send and the k-th recv of the same (src, dst) channel (k counted by
rescanning the programs), advances a rank once every op of its current item has met its
partner, and stops when a whole round changes nothing.  Quadratic and proud of it.

Inputs: built-in schedules with random swaps and moves of compute ops, lowered naive or
lockstep and then perturbed (items swapped, groups split or merged); and random literal programs
built from random messages shuffled across the ranks.  2,000+ examples in all.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.programs import BASES, _base, literal_programs, mutated_builtins  # noqa: F401

from ppir.ir import Action, OpKind, Schedule, item_actions
from ppir.verify import deadlock_free, verify

SEND = (OpKind.SEND_F, OpKind.SEND_B)


# ------------------------------------------------------------------ the naive interpreter
def _peer(s: Schedule, a: Action):
    other = a.stage + (1 if a.kind in (OpKind.SEND_F, OpKind.RECV_B) else -1)
    if not (0 <= a.stage < s.stages and 0 <= other < s.stages):
        return None
    return s.placement[other]


def _channel_rank(s: Schedule, prog, r: int, i: int, j: int) -> int:
    """How many ops of the same direction to the same peer come before item i, op j."""
    a = prog[i][j]
    me = (a.kind in SEND, _peer(s, a))
    n = 0
    for ii in range(i + 1):
        for jj, b in enumerate(prog[ii]):
            if (ii, jj) == (i, j):
                return n
            if b.kind.is_comm and (b.kind in SEND, _peer(s, b)) == me:
                n += 1
    raise AssertionError("unreachable")


def naive_completes(s: Schedule) -> bool:
    progs = [[list(item_actions(it)) for it in p] for p in s.programs]
    pc = [0] * s.ranks
    met = [set() for _ in range(s.ranks)]
    changed = True
    while changed:
        changed = False
        for r in range(s.ranks):
            if pc[r] >= len(progs[r]):
                continue
            item = progs[r][pc[r]]
            for j, a in enumerate(item):
                if a.kind.is_compute or j in met[r]:
                    continue
                q = _peer(s, a)
                if q is None or pc[q] >= len(progs[q]):
                    continue
                k = _channel_rank(s, progs[r], r, pc[r], j)
                for j2, b in enumerate(progs[q][pc[q]]):
                    if (
                        b.kind.is_comm
                        and (b.kind in SEND) != (a.kind in SEND)
                        and _peer(s, b) == r
                        and j2 not in met[q]
                        and not (q == r and j2 == j)
                        and _channel_rank(s, progs[q], q, pc[q], j2) == k
                    ):
                        met[r].add(j)
                        met[q].add(j2)
                        changed = True
                        break
            if all(b.kind.is_compute or jj in met[r] for jj, b in enumerate(item)):
                pc[r] += 1
                met[r] = set()
                changed = True
    return all(pc[r] == len(progs[r]) for r in range(s.ranks))


# ------------------------------------------------------------------ inputs
# (the generators live in tests/oracle/programs.py, shared with the oracle cross-check)


@settings(max_examples=1100)
@given(mutated_builtins())
def test_verdict_matches_naive_interpreter_on_mutated_builtins(s):
    assert deadlock_free(s) == naive_completes(s)


@settings(max_examples=1000)
@given(literal_programs())
def test_verdict_matches_naive_interpreter_on_literal_programs(s):
    assert deadlock_free(s) == naive_completes(s)


@settings(max_examples=300)
@given(st.one_of(mutated_builtins(), literal_programs()))
def test_relaxed_progress_accepts_whatever_fifo_accepts(s):
    if deadlock_free(s, "fifo"):
        assert deadlock_free(s, "relaxed")


@settings(max_examples=200)
@given(st.one_of(mutated_builtins(), literal_programs()))
def test_verify_reports_deadlock_exactly_when_stuck_on_a_cycle(s):
    """A complete run never yields 'deadlock'; a stuck run with every op matched always does
    (or the order-cycle that causes it)."""
    kinds = {d.kind for d in verify(s).errors}
    if deadlock_free(s):
        assert "deadlock" not in kinds
    elif not kinds & {"unmatched-send", "unmatched-recv", "out-of-range", "local-order"}:
        assert kinds & {"deadlock", "order-cycle"}, kinds
