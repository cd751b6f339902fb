"""Benchmark: memory + P2P analysis of interleaved_1f1b at P=32, v=4 for growing M.

Expansion and ``ppir.compile`` (what ``ppir analyze`` runs: lowered, overlapped, verified) happen
once per size, outside the timed region; the timed region is ``analyze_memory`` +
``analyze_p2p`` on the compiled program (best of --repeat runs).  Linear
time shows as a flat microseconds-per-action column.

    python bench/bench_analyze.py            # M = 64, 128, 256, 512
    python bench/bench_analyze.py --sizes 512 --repeat 1
"""

from __future__ import annotations

import argparse
import time

import ppir
from ppir import load_schedule
from ppir.analysis.memory import analyze_memory, analyze_p2p


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--P", type=int, default=32)
    ap.add_argument("--v", type=int, default=4)
    ap.add_argument("--sizes", default="64,128,256,512", help="values of M")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    print(f"interleaved_1f1b P={a.P} v={a.v}: analyze_memory + analyze_p2p, best of {a.repeat}")
    print(
        f"{'M':>5} {'actions':>9} {'expand+compile s':>17} {'analyze s':>10} {'us/action':>10}"
        f" {'peak A (rank 0)':>16}"
    )
    for M in (int(x) for x in a.sizes.split(",")):
        t0 = time.perf_counter()
        s = ppir.compile(
            load_schedule(
                "interleaved_1f1b", {"P": a.P, "M": M, "v": a.v}, max_ops=10**8, max_steps=10**9
            )
        ).program
        t_prep = time.perf_counter() - t0
        best = float("inf")
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            mem = analyze_memory(s)
            analyze_p2p(s)
            best = min(best, time.perf_counter() - t0)
        n = s.num_ops
        print(
            f"{M:>5} {n:>9} {t_prep:>17.2f} {best:>10.3f} {best / n * 1e6:>10.2f}"
            f" {str(mem.per_rank[0].peak_activations):>16}"
        )


if __name__ == "__main__":
    main()
