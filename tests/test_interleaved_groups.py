"""Interleaved 1F1B with Megatron's microbatch group size N.

References: Megatron-LM's own order logic (ported in ``tests/peers/megatron.py``) and torch's
ScheduleInterleaved1F1B generator, which is Megatron's order with N = M / max(1, M // P).
The grids include M not divisible by P and N != P.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from peers import megatron

from ppir.diagnostics import PpirError
from ppir.frontend.loader import load_schedule
from ppir.passes import LowerComms
from ppir.verify import verify


def orders(name, **params):
    s = load_schedule(name, params)
    return [[str(a) for a in s.programs[r]] for r in range(s.ranks)]


def megatron_accepts(P, M, N):
    try:
        megatron.check(P, M, N)
    except megatron.MegatronRejects:
        return False
    return True


# (P, M, N) with N in [P, M], M up to 3P + 2: N != P and M mod P != 0 included
GRID = [
    (P, M, N)
    for P in range(2, 9)
    for M in range(P, 3 * P + 3)
    for N in sorted({P, P + 1, P + 2, M // 2, M - 1, M})
    if P <= N <= M
]


@pytest.mark.parametrize("P", range(2, 9))
def test_orders_equal_megatron(P):
    cases = [(M, N) for p, M, N in GRID if p == P and megatron_accepts(P, M, N)]
    assert any(M % P for M, _ in cases) and any(N != P for _, N in cases)
    for M, N in cases:
        for v in (1, 2, 3):
            want = [megatron.rank_order(P, M, v, r, N) for r in range(P)]
            assert orders("interleaved_1f1b", P=P, M=M, v=v, N=N) == want, (P, M, v, N)


def test_group_size_defaults_to_p():
    assert orders("interleaved_1f1b", P=4, M=12, v=2) == orders(
        "interleaved_1f1b", P=4, M=12, v=2, N=4
    )
    assert orders("interleaved_1f1b", P=4, M=12, v=2) == [
        megatron.rank_order(4, 12, 2, r) for r in range(4)
    ]


@pytest.mark.parametrize("P,M,N", GRID[::5])
def test_validity_rule_is_megatrons(P, M, N):
    try:
        load_schedule("interleaved_1f1b", {"P": P, "M": M, "v": 2, "N": N})
        accepted = True
    except PpirError as e:
        assert e.kind == "require-failed", e.render()
        accepted = False
    assert accepted == megatron_accepts(P, M, N)


def test_rejection_names_the_rule():
    with pytest.raises(PpirError) as e:
        load_schedule("interleaved_1f1b", {"P": 4, "M": 10, "v": 2})
    assert "last group" in e.value.render() and "N = 4" in e.value.render()


def _torch_order(P, M, v, rank):
    mod = pytest.importorskip("torch.distributed.pipelining.schedules")
    rounds = max(1, M // P)
    ns = SimpleNamespace(
        n_local_stages=v, microbatches_per_round=M // rounds, pp_group_size=P, _n_microbatches=M
    )
    ops = mod.ScheduleInterleaved1F1B._calculate_single_rank_operations(ns, rank)
    return [str(a) for a in ops if a is not None]


def test_torch_is_megatron_with_its_group_size():
    pytest.importorskip("torch")
    seen_uneven = 0
    for P in range(2, 9):
        for M in range(P, 3 * P + 2):
            rounds = max(1, M // P)
            if M % rounds:
                continue  # torch rejects it
            N = M // rounds
            if not megatron_accepts(P, M, N):
                continue
            seen_uneven += M % P != 0
            for v in (2, 3):
                ours = orders("interleaved_1f1b", P=P, M=M, v=v, N=N)
                assert ours == [_torch_order(P, M, v, r) for r in range(P)], (P, M, v)
    assert seen_uneven >= 10


@pytest.mark.parametrize(
    "P,M,N", [(2, 5, 3), (3, 7, 4), (4, 10, 5), (4, 9, 5), (4, 11, 7), (8, 20, 10)]
)
def test_uneven_groups_verify(P, M, N):
    for v in (1, 2, 3):
        s = load_schedule("interleaved_1f1b", {"P": P, "M": M, "v": v, "N": N})
        report = verify(LowerComms().apply(s))
        assert report.ok, report.diagnostics
