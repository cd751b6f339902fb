"""Overlap benchmark (estimator): exposed communication with and without the overlap-comms pass.

    python bench/bench_overlap.py

Per-message transfer time = 25 % and 50 % of one chunk's forward (a chunk's forward is 1/v of
a rank share's, F=1, B=2 per rank share).  For each schedule, the lockstep lowering with
blocking groups (--no-overlap) and with the overlap-comms pass (post early, wait late) are timed
by the cost estimator; "exposed" is the sum over ranks of the time a message is on the wire
while its rank does not compute.  Everything is computed by ppir from the IR.
"""

from __future__ import annotations

from fractions import Fraction

from ppir.backends.cost.config import make_config
from ppir.backends.cost.estimate import estimate

from ppir.loader import load_schedule
from ppir.passes import LowerComms, OverlapComms

CASES = [("1f1b", {"P": 4, "M": 8}, 1), ("interleaved_1f1b", {"P": 4, "M": 8, "v": 2}, 2),
         ("interleaved_1f1b", {"P": 4, "M": 8, "v": 4}, 4),
         ("interleaved_1f1b", {"P": 8, "M": 16, "v": 2}, 2)]


def exposed(e) -> float:
    return float(sum(r.exposed_comm for r in e.per_rank))


def main() -> None:
    print(f"{'schedule':<32} {'xfer':>5} | {'step':>7} {'exposed':>8} | {'step':>7} "
          f"{'exposed':>8} | {'exposed cut':>11} | {'crit path':>9}")
    print(f"{'':<32} {'':>5} | {'no-overlap':>16} | {'overlap':>16} |")
    for name, params, v in CASES:
        lowered = LowerComms().apply(load_schedule(name, params))
        overlapped = OverlapComms().apply(lowered)
        for share in (Fraction(1, 4), Fraction(1, 2)):
            cfg = make_config({"comm": {"latency": float(share / v)}})
            a, b = estimate(lowered, cfg), estimate(overlapped, cfg)
            cut = 1 - exposed(b) / exposed(a) if exposed(a) else 0.0
            label = f"{name}({', '.join(f'{k}={x}' for k, x in params.items())})"
            print(f"{label:<32} {float(share):>5.2f} | {float(a.step_time):7.2f} "
                  f"{exposed(a):8.2f} | {float(b.step_time):7.2f} {exposed(b):8.2f} | "
                  f"{cut:10.1%} | {float(b.critical_path):9.2f}")
    print("xfer = per-message transfer time as a fraction of a chunk's forward; times in units "
          "of one rank share's forward; exposed = sum over ranks; crit path = longest path "
          "through the compute ops with each cross-rank edge weighted by its transfer (a lower "
          "bound on step time for this compute order)")


if __name__ == "__main__":
    main()
