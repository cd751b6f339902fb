"""Memory and P2P analysis against closed forms (Narayanan et al. SC'21, Korthikanti et al.
MLSys'23, the zero-bubble papers) and against brute-force replay."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ppir
from ppir import load_schedule
from ppir.analysis.memory import analyze_memory, analyze_p2p, split_fractions
from ppir.analysis.models import make_model
from ppir.ir import Action, OpKind, Schedule
from ppir.passes import LowerComms

GRID_PM = [(P, M) for P in (1, 2, 3, 4, 6) for M in (1, 2, 3, 5, 8, 12)]


@pytest.mark.parametrize("P,M", GRID_PM)
def test_gpipe_every_rank_holds_M(P, M):
    rep = analyze_memory(load_schedule("gpipe", {"P": P, "M": M}))
    assert [m.peak_activations for m in rep.per_rank] == [M] * P
    assert all(m.peak_op == Action(m.rank, OpKind.F, M - 1) for m in rep.per_rank)


@pytest.mark.parametrize("P,M", GRID_PM)
def test_1f1b_rank_r_holds_min_P_minus_r_M(P, M):
    rep = analyze_memory(load_schedule("1f1b", {"P": P, "M": M}))
    assert [m.peak_activations for m in rep.per_rank] == [min(P - r, M) for r in range(P)]
    assert rep.worst.rank == 0


GRID_PMV = [(P, k * P, v) for P in (1, 2, 3, 4, 5) for k in (1, 2, 3) for v in (1, 2, 3, 4)]


@pytest.mark.parametrize("P,M,v", GRID_PMV)
def test_interleaved_closed_forms(P, M, v):
    rep = analyze_memory(load_schedule("interleaved_1f1b", {"P": P, "M": M, "v": v}))
    assert rep.chunk_size == Fraction(1, v)
    # derived from the program: rank r warms up w = min(2(P-r-1)+(v-1)P, vM) forwards; the
    # steady phase adds one more before its first backward unless warm-up took every forward.
    for r, m in enumerate(rep.per_rank):
        w = min(2 * (P - r - 1) + (v - 1) * P, v * M)
        assert m.peak_chunks == (w + 1 if w < v * M else v * M)
        assert m.peak_activations == m.peak_chunks / v
    # REFERENCE: rank 0 holds (vP+P-1)/v A when M is large enough (warm-up below vM)
    if v * P + P - 2 < v * M:
        assert rep.per_rank[0].peak_activations == Fraction(v * P + P - 1, v)
        assert rep.per_rank[0].peak_activations == (1 + Fraction(P - 1, P * v)) * P


@pytest.mark.parametrize("P,v", [(2, 2), (4, 2), (4, 4), (3, 4)])
def test_p2p_counts_looped_and_vshape(P, v):
    M = 2 * P
    looped = analyze_p2p(load_schedule("interleaved_1f1b", {"P": P, "M": M, "v": v}))
    assert looped.forward_per_microbatch == v * P - 1 == looped.backward_per_microbatch
    assert looped.local_forward == 0
    vs = analyze_p2p(load_schedule("interleaved_vshape", {"P": P, "M": M, "v": v}))
    # each fold of the V keeps the hand-off on one rank: v-1 local hand-offs per microbatch
    assert vs.forward_per_microbatch == v * (P - 1)
    assert vs.local_forward == vs.local_backward == (v - 1) * M
    assert sum(r.sends_forward for r in vs.per_rank) == vs.forward_messages


def test_p2p_bytes_with_model():
    m = make_model("llama3-8b", tp=2)
    rep = analyze_p2p(load_schedule("1f1b", {"P": 4, "M": 8}), m)
    assert rep.message_bytes == 8192 * 1 * 4096 * 2 // 2
    assert rep.bytes_per_step == 2 * 3 * 8 * rep.message_bytes
    assert rep.per_rank[0].bytes_sent == 8 * rep.message_bytes  # 8 forward sends, no backward


def test_split_fractions_default_is_ppir_runtime_split():
    """F keeps 34h + 5as (16-bit, per token-layer); I keeps for W the norm and linear inputs
    (2h + 7h elements) and adds their output gradients (2h + 3h + h + 4h + h): 40h bytes."""
    g = make_model("gpt3-175b")
    h, a, s = g.hidden, g.heads, g.seq
    assert split_fractions() == Fraction(5 * a * s - 6 * h, 34 * h + 5 * a * s) == Fraction(37, 57)
    assert split_fractions(g, "selective") == Fraction(-6, 34)  # I keeps more than it frees
    # full recomputation: F keeps the layer input (2h bytes); W's 40h stay from I to W, so I
    # keeps 38h more than F did (it was 0: the input alone, which understated it 20-fold)
    assert split_fractions(g, "full") == Fraction(2 * h - 40 * h, 2 * h) == -19


def test_first_stage_frees_nothing_at_i():
    """Stage 0's input (the data) has no gradient: its I computes nothing, W frees the chunk."""
    s = load_schedule("zb_h1", {"P": 2, "M": 4})
    rep = analyze_memory(s, i_fraction=Fraction(1, 2))
    ops = list(s.compute_actions(0))
    curve = rep.per_rank[0].curve_chunks()
    for k, a in enumerate(ops):
        if a.kind is OpKind.I:
            assert curve[k] == curve[k - 1]
    ops1, curve1 = list(s.compute_actions(1)), rep.per_rank[1].curve_chunks()
    drops = [curve1[k - 1] - curve1[k] for k, a in enumerate(ops1) if a.kind is OpKind.I]
    assert drops and all(d == 0.5 for d in drops)


ZB_TEXT = """
schedule zb(P = 2, M = 2)
ranks P
stages P
microbatches M
placement looped
program r {
  for m in 0 .. M { F(m) }
  for m in 0 .. M { I(m) }
  for m in 0 .. M { W(m) }
}
"""


def test_split_backward_frees_in_two_parts():
    from ppir import load_text

    s = load_text(ZB_TEXT)
    rep = analyze_memory(s, i_fraction=Fraction(1, 4))
    curve = [Fraction(c) * rep.per_rank[1].unit for c in rep.per_rank[1].curve]
    assert curve == [1, 2, Fraction(7, 4), Fraction(3, 2), Fraction(3, 4), 0]
    first = [Fraction(c) * rep.per_rank[0].unit for c in rep.per_rank[0].curve]
    assert first == [1, 2, 2, 2, 1, 0]  # stage 0's I computes nothing (no input gradient)


def test_bytes_and_layers():
    m = make_model("gpt3-175b", tp=8)
    rep = analyze_memory(load_schedule("1f1b", {"P": 8, "M": 16}), m, recompute="selective")
    assert rep.layers_per_stage == 12
    per_layer = Fraction(34 * 2048 * 12288, 8)
    assert rep.per_rank[0].peak_bytes == 8 * 12 * per_layer


# ------------------------------------------------------------------ brute force on random schedules
@st.composite
def random_schedules(draw):
    """A random placement and a random linear extension of the dependency DAG, with each
    (stage, mb) backward either B or I+W; per-rank programs are the extension's subsequences."""
    P = draw(st.integers(1, 3))
    S = draw(st.integers(1, 5))
    M = draw(st.integers(1, 4))
    placement = tuple(draw(st.integers(0, P - 1)) for _ in range(S))
    split = {(s, m): draw(st.booleans()) for s in range(S) for m in range(M)}
    done: set = set()
    order: list[Action] = []
    nxt = {(s, m): "F" for s in range(S) for m in range(M)}

    def ready(s, m):
        k = nxt[(s, m)]
        if k == "F":
            return s == 0 or (s - 1, "F", m) in done
        if k in ("B", "I"):
            return s == S - 1 or (s + 1, "bwd", m) in done
        return k == "W"

    while True:
        cand = sorted((s, m) for (s, m), k in nxt.items() if k and ready(s, m))
        if not cand:
            break
        s, m = cand[draw(st.integers(0, len(cand) - 1))]
        k = nxt[(s, m)]
        order.append(Action(s, OpKind(k), m))
        if k == "F":
            done.add((s, "F", m))
            nxt[(s, m)] = "I" if split[(s, m)] else "B"
        else:
            if k in ("B", "I"):
                done.add((s, "bwd", m))
            nxt[(s, m)] = "W" if k == "I" else None
    programs = tuple(tuple(a for a in order if placement[a.stage] == r) for r in range(P))
    return Schedule("random", (), P, S, M, placement, programs)


def brute_memory(prefix: list[Action], fi: Fraction) -> Fraction:
    """Sum over the (stage, mb) chunks of what is still alive after ``prefix`` (stage 0's I
    frees nothing: the data has no gradient)."""
    state: dict = {}
    for a in prefix:
        state[(a.stage, a.mb)] = a.kind
    alive = {OpKind.F: Fraction(1), OpKind.I: 1 - fi, OpKind.B: Fraction(0), OpKind.W: Fraction(0)}
    return sum(
        (Fraction(1) if k is OpKind.I and s == 0 else alive[k] for (s, _), k in state.items()),
        Fraction(0),
    )


def brute_recv(actions: list[Action]) -> int:
    best = 0
    for i in range(len(actions) + 1):
        pre = actions[:i]
        keys = {(a.stage, a.kind, a.mb) for a in pre}
        n = 0
        for a in pre:
            if a.kind is OpKind.RECV_F and (a.stage, OpKind.F, a.mb) not in keys:
                n += 1
            if a.kind is OpKind.RECV_B and not (
                {(a.stage, OpKind.B, a.mb), (a.stage, OpKind.I, a.mb)} & keys
            ):
                n += 1
        best = max(best, n)
    return best


@settings(max_examples=60)
@given(
    random_schedules(),
    st.sampled_from([Fraction(0), Fraction(1, 3), Fraction(37, 57), Fraction(-127, 513), 1]),
)
def test_against_brute_force(s, fi):
    low = LowerComms().apply(s)
    rep = analyze_memory(low, i_fraction=fi)  # the compute curve is the compute order's
    for r, m in enumerate(rep.per_rank):
        prog = s.compute_actions(r)
        curve = [brute_memory(prog[: i + 1], fi) for i in range(len(prog))]
        assert [c * m.unit for c in m.curve] == curve
        peak = max(curve, default=Fraction(0))
        assert m.peak_chunks == peak
        assert m.peak_activations == peak * Fraction(s.ranks, s.stages)
        if peak > 0:
            assert m.peak_index == curve.index(peak) and m.peak_op == prog[m.peak_index]
        assert m.peak_recv == brute_recv(list(low.actions(r)))
    p2p = analyze_p2p(s)
    cross_f = sum(
        1
        for r in range(s.ranks)
        for a in s.compute_actions(r)
        if a.kind is OpKind.F and a.stage > 0 and s.placement[a.stage - 1] != r
    )
    cross_b = sum(
        1
        for r in range(s.ranks)
        for a in s.compute_actions(r)
        if a.kind.is_backward and a.stage + 1 < s.stages and s.placement[a.stage + 1] != r
    )
    assert (p2p.forward_messages, p2p.backward_messages) == (cross_f, cross_b)
    assert p2p.local_forward + p2p.forward_messages == (s.stages - 1) * s.microbatches


def test_messages_per_microbatch_count_every_pipelines_microbatches():
    """Bidirectional DualPipe at P=4 runs 8 microbatches in two pipelines of 4: 24 forward
    messages are 3 per microbatch (P-1), not 6 (they were divided by one pipeline's 4)."""
    p2p = analyze_p2p(ppir.load("dualpipe", P=4, M=8))
    assert p2p.forward_messages == 24 and p2p.microbatches == 8
    assert p2p.forward_per_microbatch == p2p.backward_per_microbatch == 3
