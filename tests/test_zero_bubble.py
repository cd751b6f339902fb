"""Zero-bubble family: published bubbles and memory reproduced from the IR, torch's orders.

Bubbles are the estimator's (``estimate`` on the lockstep-lowered program, default costs F=1,
B=2, I=1, W=1 per rank share, free communication) and, independently, the compute-graph ASAP
timeline (:func:`ppir.synth.timing.item_asap`).  Two bubble measures:

* *idle*: step time minus a rank's busy time (the estimator's ``idle``);
* *span*: a rank's last finish minus its first start minus its busy time (the "per-stage span"
  of the ZB paper: the figure that stays when the optimizer step is overlapped).
"""

from __future__ import annotations

from fractions import Fraction as Fr
from types import SimpleNamespace

import pytest

from ppir.analysis.config import make_config
from ppir.analysis.estimate import estimate
from ppir.analysis.memory import analyze_memory
from ppir.diagnostics import PpirError
from ppir.frontend.loader import load_schedule
from ppir.ir import OpKind, Overlap
from ppir.passes import LowerComms
from ppir.synth.timing import idle_per_rank, item_asap

GRID = [(P, M) for P in (2, 3, 4, 6, 8) for M in (2 * P, 2 * P + 1, 3 * P, 4 * P)]
F, B, I, W = Fr(1), Fr(2), Fr(1), Fr(1)  # noqa: E741 - the reference's names


def timed(name, P, M, config=None):
    s = load_schedule(name, {"P": P, "M": M})
    e = estimate(LowerComms().apply(s), config)
    span = [row[-1].end - row[0].start - r.busy for row, r in zip(e.ops, e.per_rank)]
    v = s.stages // P
    costs = {OpKind.F: F / v, OpKind.B: B / v, OpKind.I: I / v, OpKind.W: W / v}
    asap = item_asap(s, costs)
    return s, e, span, asap


@pytest.mark.parametrize("P,M", GRID)
def test_zb_h1_bubble_is_published(P, M):
    s, e, span, asap = timed("zb_h1", P, M)
    want = (P - 1) * (F + I - W)
    assert max(r.idle for r in e.per_rank) == want
    assert max(idle_per_rank(asap)) == want  # the lowering adds no waiting
    assert e.per_rank[0].idle == want and span[-1] == 0


@pytest.mark.parametrize("P,M", GRID)
def test_zb_h2_span_bubble_is_published(P, M):
    s, e, span, asap = timed("zb_h2", P, M)
    assert max(span) == max(0, (P - 1) * (F + I - 2 * W))
    assert float(max(idle_per_rank(asap))) == max(r.idle for r in e.per_rank)


@pytest.mark.parametrize("P,M", GRID)
def test_zbv_has_zero_span_bubble(P, M):
    s, e, span, asap = timed("zbv", P, M)
    assert max(span) == 0  # F = I = W and M >= 2P - 1
    assert max(r.idle for r in e.per_rank) == (P - 1) * F / 2  # only the fill of the V
    assert float(max(idle_per_rank(asap))) == max(r.idle for r in e.per_rank)


@pytest.mark.parametrize("P,M", [(P, M) for P, M in GRID if M % P == 0])
def test_interleaved_zb_bubble_is_zb_h1s_over_v(P, M):
    """No paper states it; measured: ZB-H1's (P-1)(F+I-W) divided by the v chunks."""
    for v in (2, 3):
        e = estimate(LowerComms().apply(load_schedule("interleaved_zb", {"P": P, "M": M, "v": v})))
        assert max(r.idle for r in e.per_rank) == float((P - 1) * (F + I - W) / v)


@pytest.mark.parametrize("P,M", GRID)
def test_dualpipev_bubble_is_published(P, M):
    s, e, span, asap = timed("dualpipev", P, M)
    f, b, w = F / 2, B / 2, W / 2  # DualPipe's F, B, W are per chunk
    fb = f + b  # default: an overlapped step costs its parts (no communication to hide)
    want = (P - 1) * (fb + b - 3 * w)
    assert [r.idle for r in e.per_rank] == [want] * P
    assert idle_per_rank(asap) == [want] * P
    assert any(isinstance(it, Overlap) for it in s.programs[0])


def test_dualpipev_overlap_cost_is_configurable():
    """costs.FB times an overlapped step as one op; with FB = B (perfect overlap) the
    compute-graph bubble is the published (P-1)(F&B + B - 3W), F&B = max(F, B)."""
    P, M = 4, 12
    s = load_schedule("dualpipev", {"P": P, "M": M})
    fast = estimate(LowerComms().apply(s), make_config({"costs": {"FB": 2}}))
    slow = estimate(LowerComms().apply(s))
    assert fast.step_time < slow.step_time
    n_overlaps = sum(isinstance(it, Overlap) for it in s.programs[0])
    assert fast.per_rank[0].busy == slow.per_rank[0].busy - n_overlaps * Fr(1, 2)
    f, b, w = Fr(1, 2), Fr(1), Fr(1, 2)
    costs = {OpKind.F: f, OpKind.B: b, OpKind.I: Fr(1, 2), OpKind.W: w}
    asap = item_asap(s, costs, fb_ratio=b / (f + b))
    assert max(idle_per_rank(asap)) == (P - 1) * (b + b - 3 * w)
    # the lockstep lowering places exchanges by the sum-cost timeline: it adds waiting here
    assert max(r.idle for r in fast.per_rank) >= max(idle_per_rank(asap))


@pytest.mark.parametrize("P,M", GRID)
def test_memory_column(P, M):
    """Activations held until the weight pass (i_fraction = 0), in A, on every rank."""
    want = {"zb_h1": P, "zb_h2": 2 * P - 1, "zbv": P, "dualpipev": P + Fr(1, 2)}
    for name, peak in want.items():
        s = load_schedule(name, {"P": P, "M": M})
        rep = analyze_memory(s, i_fraction=0)
        assert [m.peak_activations for m in rep.per_rank] == [peak] * P, name
        # I frees part of the activation: never more with the default split
        assert all(d.peak_activations <= peak for d in analyze_memory(s).per_rank)


def test_dualpipev_memory_is_2p_plus_1_chunks():
    """DualPipe README: PP + 1 chunk activations; DualPipeV on P ranks is DualPipe on 2P."""
    s = load_schedule("dualpipev", {"P": 4, "M": 8})
    assert [m.peak_chunks for m in analyze_memory(s, i_fraction=0).per_rank] == [9] * 4


def test_v_half_halves_1f1b_memory_and_bubble():
    for P in (4, 6, 8):
        M = 3 * P
        s = load_schedule("v_half", {"P": P, "M": M})
        peaks = [m.peak_activations for m in analyze_memory(s, i_fraction=0).per_rank]
        assert max(peaks) == (P + 2) // 2
        ours = estimate(LowerComms().apply(s))
        ref = estimate(LowerComms().apply(load_schedule("1f1b", {"P": P, "M": M})))
        assert max(r.idle for r in ours.per_rank) < max(r.idle for r in ref.per_rank) * 0.75


# ----------------------------------------------------------------- torch's own generators
def _torch(cls_name, P, M, rank):
    mod = pytest.importorskip("torch.distributed.pipelining.schedules")
    ns = SimpleNamespace(pp_group_size=P, _n_microbatches=M, num_stages=2 * P, n_local_stages=2)
    ops = getattr(mod, cls_name)._calculate_single_rank_operations(ns, rank)
    return [str(a) for a in ops if a is not None]


@pytest.mark.parametrize("P", range(2, 9))
def test_zbv_equals_torch(P):
    """Every M torch runs, M < 2P - 1 included (torch lays out 2P - 1 and drops the rest)."""
    for M in range(1, 4 * P + 1):
        s = load_schedule("zbv", {"P": P, "M": M})
        for r in range(P):
            assert [str(it) for it in s.programs[r]] == _torch("ScheduleZBVZeroBubble", P, M, r)


def _torch_izb(P, M, v, rank):
    mod = pytest.importorskip("torch.distributed.pipelining.schedules")
    rounds = max(1, M // P)
    ns = SimpleNamespace(
        n_local_stages=v, microbatches_per_round=M // rounds, pp_group_size=P, _n_microbatches=M
    )
    ops = mod.ScheduleInterleavedZeroBubble._calculate_single_rank_operations(ns, rank)
    return [str(a) for a in ops if a is not None]


@pytest.mark.parametrize("P", range(2, 9))
def test_interleaved_zb_equals_torch(P):
    """torch's ScheduleInterleavedZeroBubble, v = 2 and 3, every M in 1..4P+1 torch accepts
    (M divisible by its max(1, M // P) rounds): M < P and M not divisible by P included."""
    seen = 0
    for M in range(1, 4 * P + 2):
        if M % max(1, M // P):
            continue  # torch rejects it
        seen += 1
        for v in (2, 3):
            s = load_schedule("interleaved_zb", {"P": P, "M": M, "v": v})
            ours = [[str(a) for a in s.programs[r]] for r in range(P)]
            assert ours == [_torch_izb(P, M, v, r) for r in range(P)], (P, M, v)
    assert seen >= P + 2


def test_interleaved_zb_takes_megatron_group_sizes():
    """N != torch's choice: still every op once and deadlock-free (P=4, M=10: N = 5 or 10)."""
    from ppir.verify import verify

    for N in (5, 10):
        s = load_schedule("interleaved_zb", {"P": 4, "M": 10, "v": 2, "N": N})
        assert verify(LowerComms().apply(s)).ok
    with pytest.raises(PpirError) as e:
        load_schedule("interleaved_zb", {"P": 4, "M": 10, "v": 2, "N": 4})
    assert e.value.kind == "require-failed" and "last group" in e.value.render()


@pytest.mark.parametrize("P,M", [(2, 4), (2, 7), (3, 6), (4, 8), (4, 11), (6, 12), (8, 16)])
def test_dualpipev_equals_torch(P, M):
    s = load_schedule("dualpipev", {"P": P, "M": M})
    for r in range(P):
        assert [str(it) for it in s.programs[r]] == _torch("ScheduleDualPipeV", P, M, r)


@pytest.mark.parametrize("name", ["zb_h1", "zb_h2", "zbv", "dualpipev", "v_half", "interleaved_zb"])
def test_every_op_once(name):
    for P in (2, 3, 4, 5):
        extra = {"zbv": (1, P - 1), "interleaved_zb": (P - 1, 3 * P)}.get(name, ())
        for M in ((2 * P, 3 * P + 1) if name != "interleaved_zb" else (2 * P,)) + extra:
            s = load_schedule(name, {"P": P, "M": M})
            seen = [a.key for r in range(P) for a in s.actions(r)]
            assert len(seen) == len(set(seen))
            kinds = {k for _, k, _ in seen}
            n_b = sum(1 for _, k, _ in seen if k in (OpKind.B, OpKind.I))
            assert n_b == s.stages * M and kinds <= {OpKind.F, OpKind.B, OpKind.I, OpKind.W}
            n_i = sum(1 for _, k, _ in seen if k is OpKind.I)
            assert n_i == sum(1 for _, k, _ in seen if k is OpKind.W)
