"""Random programs for the property tests and the oracle cross-check: built-ins with their
compute ops moved, lowered and then perturbed (items swapped, groups split or merged); random
literal programs from random messages; and valid schedules with random placements, split
backward, fused F&B steps, either lowering, and deferred groups (overlap-comms), optionally
broken afterwards.  Hypothesis strategies, deterministic under the ``ci`` profile."""

from __future__ import annotations

import random
from functools import cache

from hypothesis import assume
from hypothesis import strategies as st

from ppir.analysis.timeline import run
from ppir.frontend.loader import load_schedule
from ppir.ir import Action, Group, OpKind, Overlap, Schedule, item_actions, looped_placement
from ppir.ir.graph import build_graph
from ppir.passes import LowerComms, OverlapComms
from ppir.testing import valid_schedules

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


@st.composite
def fused(draw, s: Schedule) -> Schedule:
    """``s`` with some adjacent forward-then-backward pairs of a rank fused into overlapped F&B
    steps (only when the compute order stays acyclic)."""
    programs = []
    for r in range(s.ranks):
        items, out, i = list(s.compute_items(r)), [], 0
        while i < len(items):
            a = items[i]
            b = items[i + 1] if i + 1 < len(items) else None
            if (
                isinstance(a, Action)
                and isinstance(b, Action)
                and a.kind is OpKind.F
                and b.kind in (OpKind.B, OpKind.I)
                and draw(st.booleans())
            ):
                out.append(Overlap((a, b)))
                i += 2
            else:
                out.append(a)
                i += 1
        programs.append(tuple(out))
    out = s.replace_programs(tuple(programs))
    assume(run(build_graph(out)).complete)
    return out


@st.composite
def compute_orders(draw, P=None, M=None, v=None, fuse: bool = True):
    """A valid compute-only schedule: a random placement (looped, V-shaped or shuffled), split
    backward or not per op, and (``fuse``) some F&B steps fused; P in 2..4, M in 1..4 and v
    in 1..2 unless other strategies are given."""
    how = draw(st.sampled_from(["looped", "vshape", "random"]))
    s = draw(
        valid_schedules(
            P=st.integers(2, 4) if P is None else P,
            M=st.integers(1, 4) if M is None else M,
            v=st.integers(1, 2) if v is None else v,
            placement=how,
            split_backward=None,
        )
    )
    if fuse and draw(st.booleans()):
        s = draw(fused(s))
    return s


@st.composite
def lowered_programs(draw, broken: bool = True):
    """A valid schedule (:func:`compute_orders`), lowered lockstep, eager or naive, overlapped
    or not, and (``broken``) perturbed."""
    s = draw(compute_orders())
    low = LowerComms(draw(st.sampled_from(["lockstep", "eager", "naive"]))).apply(s)
    if draw(st.booleans()):
        low = OverlapComms(hoist=draw(st.integers(0, 2))).apply(low)
    if broken and draw(st.integers(0, 3)) == 0:
        rng = random.Random(draw(st.integers(0, 2**32)))
        low = _perturb_lowered(low, rng, draw(st.integers(1, 3)))
    return low


def any_program():
    """Every generator above, broken programs included."""
    return st.one_of(mutated_builtins(), literal_programs(), lowered_programs())
