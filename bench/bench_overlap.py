"""Overlap benchmark (estimator): how much communication each lowering exposes.

    python bench/bench_overlap.py

Per-message transfer time = 25 % and 50 % of one chunk's forward (a chunk's forward is 1/v of
a rank share's; F=1, B=2 per rank share).  Each schedule is lowered three ways and timed by the
cost estimator (fifo progress, what 'ppir check' proves):

* naive      each recv right before its consumer, each send right after its producer;
* blocking   lockstep groups, posted and waited at one point ('ppir compile --no-overlap');
* overlap    what 'ppir compile' runs by default: the faster of overlap-comms over the lockstep
             and over the eager lowering, planned with the same transfer time.

Columns: ``free`` is the step of the blocking (lockstep) lowering with free communication (the
compute order alone can be shorter, where lockstep groups couple the ranks); ``crit`` is the
longest chain of compute ops and transfers through data dependencies and each rank's order, a
lower bound on the step of any lowering of this compute order.  ``exposed`` = step - free, the
time communication adds to the step; it splits into ``crit - free``, forced by the compute order,
and ``step - crit``, added by the lowering (groups posted late or waited early).
"""

from __future__ import annotations

from fractions import Fraction

from ppir.analysis.config import make_config
from ppir.analysis.estimate import estimate
from ppir.frontend.loader import load_schedule
from ppir.passes import LowerComms
from ppir.pipeline import compile
from ppir.verify import verify

CASES = [
    ("1f1b", {"P": 4, "M": 8}),
    ("interleaved_1f1b", {"P": 4, "M": 8, "v": 2}),
    ("interleaved_1f1b", {"P": 4, "M": 8, "v": 4}),
    ("interleaved_1f1b", {"P": 8, "M": 16, "v": 2}),
]


def _cut(before: float, after: float) -> str:
    return f"{1 - after / before:6.0%}" if before > 1e-12 else "     -"


def main() -> None:
    head = (
        f"{'schedule':<32} {'xfer':>4} | {'naive':>8} | {'free':>6} {'crit':>6} | "
        f"{'blocking':>8} {'overlap':>7} | {'exposed':>15} {'cut':>6} | "
        f"{'step - crit':>13} {'cut':>6}"
    )
    print(head)
    print("-" * len(head))
    for name, params in CASES:
        s = load_schedule(name, params)
        v = s.stages // s.ranks
        lockstep = LowerComms().apply(s)
        naive = LowerComms("naive").apply(s)
        naive_ok = verify(naive).ok
        free = estimate(lockstep).step_time
        for share in (Fraction(1, 4), Fraction(1, 2)):
            cfg = make_config({"comm": {"latency": share / v}})
            blk = estimate(lockstep, cfg)
            compiled = compile(s, costs=cfg)  # what 'ppir compile' runs
            ovl = compiled.estimate
            crit = compiled.dependency_bound
            nv = f"{estimate(naive, cfg).step_time:8.2f}" if naive_ok else "deadlock"
            e_b, e_o = blk.step_time - free, ovl.step_time - free
            l_b, l_o = blk.step_time - crit, ovl.step_time - crit
            label = f"{name}({', '.join(f'{k}={x}' for k, x in params.items())})"
            print(
                f"{label:<32} {float(share):>4.2f} | {nv} | {free:6.2f} {crit:6.2f} | "
                f"{blk.step_time:8.2f} {ovl.step_time:7.2f} | {e_b:6.2f} -> {e_o:5.2f} "
                f"{_cut(e_b, e_o)} | {l_b:5.2f} -> {l_o:4.2f} {_cut(l_b, l_o)}"
            )
    print(
        "xfer = transfer time per message / a chunk's forward; times in forwards of a rank "
        "share; exposed = step - free; crit = comm-weighted critical path of the compute "
        "order (no lowering of this order can beat it); naive deadlocks under rendezvous "
        "semantics"
    )


if __name__ == "__main__":
    main()
