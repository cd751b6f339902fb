"""Split backward without recomputation: I + W against B on one stage, in one process.

    python bench/bench_split_backward.py                      # 8 x (Linear(512) + GELU), batch 256
    python bench/bench_split_backward.py --width 1024 --batch 64 --repeats 40 --threads 2
    python bench/bench_split_backward.py --no-recompute       # leave the recomputing split out

For each repeat, in alternating order: a forward, then B (``torch.autograd.backward``); a
forward, then I and W as ppir's executor runs them (:mod:`ppir.torch.backward`); and a forward,
then I and W as ppir ran them before (I: ``autograd.grad(y, [x], retain_graph=True)``, W:
``autograd.grad(y, params)``, which walks the whole graph again); and torch.distributed.pipelining's
``stage_backward_input``/``stage_backward_weight`` as a peer.  Only the backward is timed.
Prints min and median per variant and the ratios (I + W) / B; checks that the three give the
same gradients.  ``--device cuda`` times on a GPU (synchronised).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn as nn

from ppir.torch.backward import backward_input, backward_weight


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--no-recompute",
        action="store_true",
        help="leave out the recomputing split (its memory use shifts the allocator's state "
        "for the variants timed after it)",
    )
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    torch.manual_seed(0)
    mod = nn.Sequential(
        *[m for _ in range(args.layers) for m in (nn.Linear(args.width, args.width), nn.GELU())]
    ).to(dev)
    params = list(mod.parameters())
    x0 = torch.randn(args.batch, args.width, device=dev)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    def forward():
        for q in params:
            q.grad = None
        x = x0.clone().requires_grad_(True)
        y = mod(x)
        sync()
        return x, y, torch.ones_like(y)

    def b():
        x, y, g = forward()
        t = time.perf_counter()
        torch.autograd.backward([y], [g])
        sync()
        return time.perf_counter() - t, x.grad

    def iw():
        x, y, g = forward()
        t = time.perf_counter()
        (dx,), work = backward_input([y], [g], [x], params)
        backward_weight(work)
        sync()
        return time.perf_counter() - t, dx

    def iw_recompute():
        x, y, g = forward()
        t = time.perf_counter()
        (dx,) = torch.autograd.grad(y, [x], g, retain_graph=True)
        for q, gq in zip(params, torch.autograd.grad(y, params, g)):
            q.grad = gq
        sync()
        return time.perf_counter() - t, dx

    def iw_torch():  # torch.distributed.pipelining's split backward, as a peer
        from torch.distributed.pipelining._backward import (
            stage_backward_input,
            stage_backward_weight,
        )

        x, y, g = forward()
        t = time.perf_counter()
        (dx,), groups = stage_backward_input([y], [g], [x], iter(params))
        stage_backward_weight(iter(params), groups)
        sync()
        return time.perf_counter() - t, dx

    variants = {"B": b, "I+W": iw, "I+W (torch)": iw_torch, "I+W (recompute)": iw_recompute}
    if args.no_recompute:
        del variants["I+W (recompute)"]
    grads = {}
    for name, f in variants.items():  # warm-up, and the gradient check
        _, dx = f()
        grads[name] = (dx.clone(), [q.grad.clone() for q in params])
    for name in [k for k in variants if k != "B"]:
        err = max(
            (a - b).abs().max().item()
            for a, b in zip(
                [grads[name][0], *grads[name][1]], [grads["B"][0], *grads["B"][1]], strict=True
            )
        )
        assert err <= 1e-4, f"{name} differs from B by {err}"
    times: dict[str, list[float]] = {k: [] for k in variants}
    order = list(variants)
    for r in range(args.repeats):
        for name in order if r % 2 == 0 else reversed(order):
            times[name].append(variants[name]()[0])
    print(
        f"stage: {args.layers} x (Linear({args.width}) + GELU), batch {args.batch}, "
        f"{args.threads} thread(s), {args.device}, {args.repeats} alternating repeats"
    )
    print(f"{'variant':18s} {'min ms':>9s} {'median ms':>10s} {'min/B':>7s} {'median/B':>9s}")
    bmin, bmed = min(times["B"]), statistics.median(times["B"])
    for name, ts in times.items():
        mn, md = min(ts), statistics.median(ts)
        print(f"{name:18s} {mn * 1e3:9.2f} {md * 1e3:10.2f} {mn / bmin:7.2f} {md / bmed:9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
