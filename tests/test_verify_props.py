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

import random
from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from ppir.frontend.loader import load_schedule
from ppir.ir import Action, Group, OpKind, Schedule, item_actions, looped_placement
from ppir.passes import LowerComms
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
BASES = [
    ("1f1b", {"P": 2, "M": 2}),
    ("1f1b", {"P": 3, "M": 3}),
    ("1f1b", {"P": 4, "M": 4}),
    ("gpipe", {"P": 3, "M": 2}),
    ("interleaved_1f1b", {"P": 2, "M": 2, "v": 2}),
    ("looped_bfs", {"P": 2, "M": 2, "v": 2}),
    ("interleaved_vshape", {"P": 2, "M": 2, "v": 2}),
]


@cache
def _base(i: int) -> Schedule:
    name, params = BASES[i]
    return load_schedule(name, params)


def _move(prog: list, rng: random.Random, n: int) -> None:
    for _ in range(n):
        if len(prog) < 2:
            return
        if rng.random() < 0.5:
            i = rng.randrange(len(prog) - 1)
            prog[i], prog[i + 1] = prog[i + 1], prog[i]
        else:
            prog.insert(rng.randrange(len(prog)), prog.pop(rng.randrange(len(prog))))


def _perturb_lowered(s: Schedule, rng: random.Random, n: int) -> Schedule:
    progs = [list(p) for p in s.programs]
    for _ in range(n):
        r = rng.randrange(s.ranks)
        prog = progs[r]
        if not prog:
            continue
        i = rng.randrange(len(prog))
        op = rng.random()
        if op < 0.4:
            _move(prog, rng, 1)
        elif op < 0.7 and isinstance(prog[i], Group) and len(prog[i].actions) > 1:
            prog[i : i + 1] = list(prog[i].actions)  # split a group into lone ops
        elif i + 1 < len(prog):  # merge two adjacent comm items into one group
            a, b = prog[i], prog[i + 1]
            if all(x.kind.is_comm for x in item_actions(a) + item_actions(b)):
                prog[i : i + 2] = [Group(item_actions(a) + item_actions(b))]
    return s.replace_programs(tuple(tuple(p) for p in progs))


@st.composite
def mutated_builtins(draw):
    s = _base(draw(st.integers(0, len(BASES) - 1)))
    rng = random.Random(draw(st.integers(0, 2**32)))
    progs = [list(p) for p in s.programs]
    for prog in progs:
        _move(prog, rng, draw(st.integers(0, 3)))
    s = s.replace_programs(tuple(tuple(p) for p in progs))
    s = LowerComms(draw(st.sampled_from(["naive", "lockstep"]))).apply(s)
    return _perturb_lowered(s, rng, draw(st.integers(0, 4)))


@st.composite
def literal_programs(draw):
    """Random messages between neighbouring stages, each send and recv dropped at random places
    in its rank's program, plus some compute ops and random grouping."""
    P = draw(st.integers(2, 4))
    S = P * draw(st.integers(1, 2))
    place = looped_placement(P, S)
    rng = random.Random(draw(st.integers(0, 2**32)))
    progs: list[list] = [[] for _ in range(P)]
    for _ in range(draw(st.integers(1, 8))):
        m = rng.randrange(3)
        if rng.random() < 0.5:
            s0 = rng.randrange(S - 1)
            send, recv = Action(s0, OpKind.SEND_F, m), Action(s0 + 1, OpKind.RECV_F, m)
        else:
            s0 = rng.randrange(1, S)
            send, recv = Action(s0, OpKind.SEND_B, m), Action(s0 - 1, OpKind.RECV_B, m)
        for a in (send, recv):
            if rng.random() < 0.9:  # now and then a message loses one end
                p = progs[place[a.stage]]
                p.insert(rng.randrange(len(p) + 1), a)
    for r in range(P):
        p = progs[r]
        for _ in range(rng.randrange(3)):
            p.insert(rng.randrange(len(p) + 1), Action(r, OpKind.F, rng.randrange(3)))
        items, i = [], 0
        while i < len(p):
            if p[i].kind.is_comm and rng.random() < 0.4:
                j = i
                while j < len(p) and p[j].kind.is_comm and j - i < 3:
                    j += 1
                items.append(Group(tuple(p[i:j])))
                i = j
            else:
                items.append(p[i])
                i += 1
        progs[r] = items
    return Schedule("random", (), P, S, 3, place, tuple(tuple(x) for x in progs))


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
