"""Verification time of interleaved_1f1b at four sizes, beside torch's _simulate_comms_compute.

    python bench/bench_verify.py            # P, M, v = (4, 32, 4) .. (32, 512, 4)
    python bench/bench_verify.py --quick    # the three smaller sizes only

For each size, in one process:
* ppir: expand the built-in ``interleaved_1f1b``, lower it (lockstep) and time ``verify`` alone
  (all checks: completeness, local order, matching, rendezvous simulation, lints);
* ppir simulate only: ``deadlock_free`` (index + rendezvous run), the part comparable to
  torch's simulator;
* ppir on torch's order: torch's ScheduleInterleaved1F1B compute order, read into a ppir
  Schedule, lowered the same way and verified (the same schedule torch simulates);
* torch: the compute-only ``pipeline_order`` of ScheduleInterleaved1F1B built without stages or a
  process group (``_calculate_single_rank_operations`` on an instance made with ``__new__``),
  lowered with ``_add_send_recv``, then ``_simulate_comms_compute`` timed alone.
The microseconds per op column shows whether the time is linear in the number of ops.
"""

from __future__ import annotations

import logging
import sys
import time

from ppir.frontend.loader import load_schedule
from ppir.ir import Action, Schedule, looped_placement
from ppir.passes import LowerComms
from ppir.verify import deadlock_free, verify

SIZES = [(4, 32, 4), (8, 64, 4), (16, 128, 4), (32, 512, 4)]


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def torch_order(P: int, M: int, v: int):
    """Compute-only pipeline_order of torch's ScheduleInterleaved1F1B (no stages, no group)."""
    from torch.distributed.pipelining.schedules import ScheduleInterleaved1F1B

    s = ScheduleInterleaved1F1B.__new__(ScheduleInterleaved1F1B)
    s.n_local_stages, s.pp_group_size, s._n_microbatches = v, P, M
    s.number_of_rounds = max(1, M // P)
    s.microbatches_per_round = M // s.number_of_rounds
    return {r: s._calculate_single_rank_operations(r) for r in range(P)}


def ppir_from_torch(order, P: int, M: int, v: int) -> Schedule:
    progs = tuple(tuple(Action.parse(str(a)) for a in order[r] if a is not None) for r in range(P))
    return Schedule(
        "torch_interleaved_1f1b",
        (("P", P), ("M", M), ("v", v)),
        P,
        P * v,
        M,
        looped_placement(P, P * v),
        progs,
    )


def torch_simulate(order, P: int, v: int) -> float:
    from torch.distributed.pipelining._utils import generate_stage_to_rank_mapping
    from torch.distributed.pipelining.schedules import _add_send_recv, _simulate_comms_compute

    stage_to_rank = generate_stage_to_rank_mapping(P, P * v).__getitem__
    lowered = _add_send_recv({r: list(order[r]) for r in order}, stage_to_rank, P * v)
    _, dt = _timed(lambda: _simulate_comms_compute(lowered, stage_to_rank, P * v))
    return dt


def main(argv: list[str]) -> None:
    logging.disable(logging.WARNING)
    sizes = SIZES[:3] if "--quick" in argv else SIZES
    print(
        f"{'P':>3} {'M':>4} {'v':>2} {'ops':>8} | {'ppir verify':>11} {'us/op':>6} | "
        f"{'ppir simulate only':>18} | {'ppir on torch order':>19} | "
        f"{'torch _simulate_comms_compute':>29}"
    )
    for P, M, v in sizes:
        s = LowerComms().apply(load_schedule("interleaved_1f1b", {"P": P, "M": M, "v": v}))
        rep, t_ppir = _timed(lambda s=s: verify(s))
        assert rep.ok and not rep.diagnostics, [d.message for d in rep.diagnostics]
        ok, t_sim = _timed(lambda s=s: deadlock_free(s))
        assert ok
        order = torch_order(P, M, v)
        ts = LowerComms().apply(ppir_from_torch(order, P, M, v))
        rep2, t_ppir_torch = _timed(lambda ts=ts: verify(ts))
        assert rep2.ok, [d.message for d in rep2.errors]
        t_torch = torch_simulate(order, P, v)
        n = s.num_ops
        print(
            f"{P:>3} {M:>4} {v:>2} {n:>8} | {t_ppir:>10.3f}s {1e6 * t_ppir / n:>6.1f} | "
            f"{t_sim:>17.3f}s | {t_ppir_torch:>18.3f}s | {t_torch:>28.3f}s",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
