"""Estimator speed: interleaved_1f1b at P=32, v=4 for growing M, beside torch's unit-step
``_simulate_comms_compute`` on the same schedule, in one run.

    python bench/bench_estimate.py [--sizes 64,128,256,512] [--torch-sizes 512] [--no-torch]

ppir: expand (.pps -> IR), lower (lockstep), estimate (timed simulation with the default costs,
free communication, plus critical path; memory analysis excluded).  torch: the compute-only
``pipeline_order`` of ScheduleInterleaved1F1B built without its constructor (no stages needed),
then ``_add_send_recv`` and ``_simulate_comms_compute`` (only the last is timed against ours).
torch is imported only here, never by the cost backend.
"""

from __future__ import annotations

import argparse
import gc
import logging
import time

from ppir.analysis.estimate import estimate
from ppir.frontend.loader import load_schedule
from ppir.passes import LowerComms


def timed(fn):
    gc.collect()
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def torch_sim(P: int, M: int, v: int) -> tuple[float, float, int]:
    """(seconds for _add_send_recv, seconds for _simulate_comms_compute, lowered actions)."""
    logging.disable(logging.WARNING)
    from torch.distributed.pipelining._utils import generate_stage_to_rank_mapping
    from torch.distributed.pipelining.schedules import (
        ScheduleInterleaved1F1B,
        _add_send_recv,
        _simulate_comms_compute,
    )

    s = ScheduleInterleaved1F1B.__new__(ScheduleInterleaved1F1B)
    s.n_local_stages, s.pp_group_size, s._n_microbatches = v, P, M
    s.number_of_rounds = max(1, M // P)
    s.microbatches_per_round = M // s.number_of_rounds
    order = {r: s._calculate_single_rank_operations(r) for r in range(P)}
    stage_to_rank = generate_stage_to_rank_mapping(P, P * v).__getitem__
    lowered, t_lower = timed(
        lambda: _add_send_recv({r: list(x) for r, x in order.items()}, stage_to_rank, P * v)
    )
    _, t_sim = timed(lambda: _simulate_comms_compute(lowered, stage_to_rank, P * v))
    return t_lower, t_sim, sum(len(x) for x in lowered.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-P", type=int, default=32)
    ap.add_argument("-v", type=int, default=4)
    ap.add_argument("--sizes", default="64,128,256,512")
    ap.add_argument("--torch-sizes", default="512")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    P, v = args.P, args.v
    print(f"interleaved_1f1b P={P} v={v}")
    print(
        "| M | lowered actions | ppir expand (s) | ppir lower (s) | ppir estimate (s) "
        "| us / action | step time (units) |"
    )
    print("|---|---|---|---|---|---|---|")
    for M in (int(x) for x in args.sizes.split(",")):
        params = {"P": P, "M": M, "v": v}
        s, t_exp = timed(lambda p=params: load_schedule("interleaved_1f1b", p))
        low, t_low = timed(lambda s=s: LowerComms().apply(s))
        est, t_est = timed(lambda low=low: estimate(low, memory=False))
        n = low.num_ops
        print(
            f"| {M} | {n} | {t_exp:.2f} | {t_low:.2f} | {t_est:.2f} | {t_est / n * 1e6:.1f} "
            f"| {est.step_time:g} |"
        )
    if args.no_torch:
        return
    print(
        "\n| M | torch lowered actions | torch _add_send_recv (s) "
        "| torch _simulate_comms_compute (s) |"
    )
    print("|---|---|---|---|")
    for M in (int(x) for x in args.torch_sizes.split(",")):
        t_lower, t_sim, n = torch_sim(P, M, v)
        print(f"| {M} | {n} | {t_lower:.2f} | {t_sim:.2f} |")


if __name__ == "__main__":
    main()
