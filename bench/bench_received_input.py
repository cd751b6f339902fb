"""Is a stage's op slower when its input has just arrived over gloo than when it is local?

    python bench/bench_received_input.py [--rounds 60] [--module examples/gpt_model.py]
        [--module-opt KEY=VALUE ...]

Two gloo processes on this machine each hold two consecutive pieces of the model (built in
four, as ``bench_estimator_accuracy.py``'s profile builds it at P=2) and time, alternating, the
second piece's forward and backward on an input made locally by the first piece a moment before
(what the profile measures inside a rank) and on the same tensor sent to the other rank and back
(what an op whose producer is on another rank gets).  Printed per rank: the median of each, and
the ratio received / local.  It tests one suspected cause of the estimator's remaining bias
(README, Status and limits); run by hand, never in timed tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_estimator_accuracy import DEFAULT_OPTS  # noqa: E402  (the accuracy bench's model)
from bench_executor import finish_worker, run_launched  # noqa: E402  (the benches' launcher)

ROOT = Path(__file__).resolve().parent.parent
MICROBATCHES = 8  # the accuracy bench's M: a microbatch is batch / M samples


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=60, help="timed rounds (after 10 warm-up ones)")
    p.add_argument("--module", default=str(ROOT / "examples" / "gpt_model.py"))
    p.add_argument(
        "--module-opt", action="append", default=None, help=f"default: {' '.join(DEFAULT_OPTS)}"
    )
    p.add_argument("--worker", metavar="OUT", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.module_opt is None:
        args.module_opt = list(DEFAULT_OPTS)
    return args


def round_trip(t, rank: int, shapes: list):
    """``t`` sent to the other rank and echoed back, on both ranks in turn (``shapes``: each
    rank's shape of ``t``): a freshly received buffer holding ``t``'s values."""
    import torch
    import torch.distributed as dist

    out = None
    for owner in (0, 1):
        peer = 1 - rank
        if rank == owner:
            out = torch.empty_like(t)
            dist.send(t, peer)
            dist.recv(out, peer)
        else:
            echo = torch.empty(shapes[owner], dtype=t.dtype)
            dist.recv(echo, peer)
            dist.send(echo, peer)
    return out


def worker(args) -> int:
    import torch
    import torch.distributed as dist

    from ppir.torch import procgroup
    from ppir.torch.model import load_model, parse_options, split_batch

    torch.set_num_threads(1)
    ctx = procgroup.init(device="cpu", timeout_s=300)
    model = load_model(args.module, parse_options(args.module_opt))
    r = ctx.rank
    first, second = (model.build_stage(j, 4) for j in (2 * r, 2 * r + 1))
    mb_in, _ = split_batch(model, 0, MICROBATCHES, "cpu", 0)
    x = mb_in[0]
    if r == 1:  # rank 1's first piece takes hidden states: make them with pieces 0 and 1
        with torch.no_grad():
            x = model.build_stage(1, 4)(model.build_stage(0, 4)(x))
    with torch.no_grad():
        h_shape = tuple(first(x).shape)
        y_shape = tuple(second(first(x)).shape)
    h_shapes, y_shapes = [None, None], [None, None]
    dist.all_gather_object(h_shapes, h_shape)
    dist.all_gather_object(y_shapes, y_shape)
    times: dict[str, list] = {k: [] for k in ("F local", "F received", "B local", "B received")}
    for i in range(10 + args.rounds):
        for how in ("local", "received"):
            h = first(x).detach()
            if how == "received":
                h = round_trip(h, r, h_shapes)
            h.requires_grad_()
            dist.barrier()
            t0 = time.perf_counter()
            y = second(h)
            t1 = time.perf_counter()
            g = torch.randn_like(y)  # written by this thread just now, as a local gradient is
            if how == "received":
                g = round_trip(g, r, y_shapes)
            dist.barrier()
            t2 = time.perf_counter()
            y.backward(g)
            t3 = time.perf_counter()
            if i >= 10:
                times[f"F {how}"].append(t1 - t0)
                times[f"B {how}"].append(t3 - t2)
    got = [None, None]
    dist.all_gather_object(got, {k: statistics.median(v) for k, v in times.items()})
    return finish_worker(r, args.worker, got)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    got = run_launched(__file__, argv, 2, deadline_s=600)
    if got is None:
        return 1
    print(
        f"model {Path(args.module).name} {' '.join(args.module_opt)} in 4 pieces, microbatch of "
        f"1/{MICROBATCHES} of the batch; medians of {args.rounds} rounds (ms)"
    )
    for r, t in enumerate(got):
        cells = "; ".join(
            f"{k} {t[k + ' local'] * 1e3:.3f} local, {t[k + ' received'] * 1e3:.3f} received "
            f"({t[k + ' received'] / t[k + ' local']:.3f}x)"
            for k in ("F", "B")
        )
        print(f"rank {r} (pieces {2 * r}, {2 * r + 1}; the second timed): {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
