"""Built-in schedules expand to the published per-rank orders.

Each built-in (.pps) is compared with an independently written order: Python re-statements of
the published algorithms in a different style (per-stage microbatch counters, as in Megatron and
torch), and, where torch is installed, torch.distributed.pipelining's own order generators.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from ppir.diagnostics import PpirError
from ppir.frontend.loader import load_schedule


def orders(name, **params):
    s = load_schedule(name, params)
    return [[str(a) for a in s.programs[r]] for r in range(s.ranks)]


# ----------------------------------------------------------------- independent references
def ref_gpipe(P, M):
    return [[f"{r}F{m}" for m in range(M)] + [f"{r}B{m}" for m in range(M)] for r in range(P)]


def ref_1f1b(P, M):
    """Greedy: run a forward while fewer than P - r are in flight, else the oldest backward."""
    out = []
    for r in range(P):
        ops, f, b = [], 0, 0
        while b < M:
            if f < M and f - b < P - r:
                ops.append(f"{r}F{f}")
                f += 1
            else:
                ops.append(f"{r}B{b}")
                b += 1
        out.append(ops)
    return out


def ref_interleaved(P, M, v):
    """Megatron/torch style: per-stage counters, chunk chosen by step // P."""
    out = []
    total = v * M
    for r in range(P):
        warm = min((v - 1) * P + 2 * (P - 1 - r), total)
        fcount, bcount = {}, {}

        def fwd(step, r=r, fcount=fcount):
            st = ((step // P) % v) * P + r
            m = fcount.get(st, 0)
            fcount[st] = m + 1
            return f"{st}F{m}"

        def bwd(step, r=r, bcount=bcount):
            st = (v - 1 - ((step // P) % v)) * P + r
            m = bcount.get(st, 0)
            bcount[st] = m + 1
            return f"{st}B{m}"

        ops = [fwd(k) for k in range(warm)]
        for i in range(total - warm):
            ops.append(fwd(warm + i))
            ops.append(bwd(i))
        ops.extend(bwd(k) for k in range(total - warm, total))
        out.append(ops)
    return out


def ref_looped_bfs(P, M, v):
    out = []
    for r in range(P):
        stages = [c * P + r for c in range(v)]
        ops = [f"{s}F{m}" for s in stages for m in range(M)]
        ops += [f"{s}B{m}" for s in reversed(stages) for m in reversed(range(M))]
        out.append(ops)
    return out


GRID = [(P, M) for P in range(2, 9) for M in range(P, 4 * P + 1)]


@pytest.mark.parametrize("P,M", GRID[::3])
def test_gpipe_matches_reference(P, M):
    assert orders("gpipe", P=P, M=M) == ref_gpipe(P, M)


@pytest.mark.parametrize("P,M", GRID[::3])
def test_1f1b_matches_reference(P, M):
    assert orders("1f1b", P=P, M=M) == ref_1f1b(P, M)


@pytest.mark.parametrize(
    "P,M,v", [(P, M, v) for P, M in GRID[::2] for v in (1, 2, 3, 4) if M % P == 0]
)
def test_interleaved_matches_reference(P, M, v):
    assert orders("interleaved_1f1b", P=P, M=M, v=v) == ref_interleaved(P, M, v)


@pytest.mark.parametrize("P,M,v", [(P, M, v) for P, M in GRID[::4] for v in (1, 2, 4)])
def test_looped_bfs_matches_reference(P, M, v):
    assert orders("looped_bfs", P=P, M=M, v=v) == ref_looped_bfs(P, M, v)


def test_1f1b_small_case_by_hand():
    # Written out by hand from the PipeDream-Flush paper's figure (P=3, M=4).
    assert orders("1f1b", P=3, M=4) == [
        ["0F0", "0F1", "0F2", "0B0", "0F3", "0B1", "0B2", "0B3"],
        ["1F0", "1F1", "1B0", "1F2", "1B1", "1F3", "1B2", "1B3"],
        ["2F0", "2B0", "2F1", "2B1", "2F2", "2B2", "2F3", "2B3"],
    ]


def test_interleaved_vshape_places_stages_on_a_v():
    s = load_schedule("interleaved_vshape", {"P": 4, "M": 8, "v": 2})
    assert s.placement == (0, 1, 2, 3, 3, 2, 1, 0)
    # Every rank warms up with 2P - 1 forwards for v = 2 (see the .pps comment).
    for r in range(4):
        prog = [a.kind.value for a in s.programs[r]]
        assert prog[:7] == ["F"] * 7 and prog[7] == "F" and prog[8] == "B"


@pytest.mark.parametrize(
    "name", ["gpipe", "1f1b", "interleaved_1f1b", "interleaved_vshape", "looped_bfs"]
)
def test_builtins_expand_on_the_grid(name):
    """P in 2..8, M in P..4P, v in 1..4 where valid: every F and B exactly once per (stage, mb)."""
    for P, v in itertools.product(range(2, 9), range(1, 5)):
        for M in (P, 2 * P + 1, 4 * P):
            try:
                s = load_schedule(
                    name, {"P": P, "M": M, "v": v} if "v" in _params(name) else {"P": P, "M": M}
                )
            except PpirError as e:
                assert e.kind == "require-failed", e.render()
                continue
            seen = [(a.stage, a.kind.value, a.mb) for r in range(P) for a in s.programs[r]]
            assert len(seen) == len(set(seen)) == 2 * s.stages * M
            for r in range(P):
                assert all(s.placement[a.stage] == r for a in s.programs[r])


def _params(name):
    from ppir.frontend.loader import read_source
    from ppir.frontend.parser import parse_text

    path, text = read_source(name)
    return {p.name for p in parse_text(text, path).header.params}


# ----------------------------------------------------------------- torch's own generators
def _torch_order(cls_name, rank, **attrs):
    mod = pytest.importorskip("torch.distributed.pipelining.schedules")
    cls = getattr(mod, cls_name)
    ops = cls._calculate_single_rank_operations(SimpleNamespace(**attrs), rank)
    return [str(a) for a in ops if a is not None]


@pytest.mark.parametrize("P,M,v", [(2, 4, 2), (4, 8, 2), (4, 8, 3), (4, 12, 4), (8, 16, 2)])
def test_interleaved_equals_torch(P, M, v):
    ours = orders("interleaved_1f1b", P=P, M=M, v=v)
    for r in range(P):
        theirs = _torch_order(
            "ScheduleInterleaved1F1B",
            r,
            n_local_stages=v,
            microbatches_per_round=P,
            pp_group_size=P,
            _n_microbatches=M,
        )
        assert ours[r] == theirs


@pytest.mark.parametrize("P,M,v", [(2, 4, 2), (4, 6, 3)])
def test_looped_bfs_equals_torch(P, M, v):
    ours = orders("looped_bfs", P=P, M=M, v=v)
    for r in range(P):
        theirs = _torch_order(
            "ScheduleLoopedBFS", r, _stages=[None] * v, pp_group_size=P, _n_microbatches=M
        )
        assert ours[r] == theirs
