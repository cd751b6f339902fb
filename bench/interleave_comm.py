"""When does interleaving stop paying off?  interleaved_1f1b at v = 1, 2, 4, 8 on one node
(NVLink) and across nodes (one rank per node, InfiniBand), from ppir's own cost model.

    python bench/interleave_comm.py [--model llama3-8b,seq=4096] [-P 4] [-M 16] [--markdown]

Prints step time, bubble and exposed communication per setting; docs/cost-model.md quotes the
output.  Every number comes from ppir.compile(...).estimate, the program 'ppir compile' runs.
"""

from __future__ import annotations

import argparse

from ppir.analysis.config import make_config
from ppir.frontend.loader import load_schedule
from ppir.pipeline import compile

SETTINGS = [  # (label, hardware section, comm section)
    ("one node, NVLink 450 GB/s", {"ranks_per_node": 8}, {}),
    ("across nodes, IB 50 GB/s", {"ranks_per_node": 1}, {}),
    (
        "across nodes, 12.5 GB/s",
        {"ranks_per_node": 1},
        {"inter_bandwidth_gbs": 12.5, "inter_latency_us": 15},
    ),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama3-8b,seq=4096")
    ap.add_argument("-P", type=int, default=4)
    ap.add_argument("-M", type=int, default=16)
    ap.add_argument("--vs", default="1,2,4,8")
    ap.add_argument(
        "--progress-model", choices=("fifo", "relaxed"), default="fifo", help="as ppir check's"
    )
    ap.add_argument(
        "--overlap",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="overlap communication as ppir compile does by default (the faster of "
        "overlap-comms over the lockstep and the eager lowering; default on)",
    )
    args = ap.parse_args()
    preset, *fields = args.model.split(",")
    model = {"preset": preset, **{k: int(v) for k, v in (f.split("=") for f in fields)}}
    print(
        f"interleaved_1f1b P={args.P} M={args.M}, model {args.model}, H100 at 50% of peak, "
        f"{args.progress_model} progress, {'with' if args.overlap else 'without'} overlap-comms"
    )
    print("| link | v | step time (ms) | bubble/total | exposed comm / rank (ms) | vs v=1 |")
    print("|---|---|---|---|---|---|")
    for label, hw, comm in SETTINGS:
        cfg = make_config({"model": model, "hardware": {"preset": "H100", **hw}, "comm": comm})
        base = None
        for v in (int(x) for x in args.vs.split(",")):
            c = load_schedule("interleaved_1f1b", {"P": args.P, "M": args.M, "v": v})
            e = compile(c, overlap=args.overlap, costs=cfg, progress=args.progress_model).estimate
            base = base or e.step_time
            exposed = max(r.exposed_comm for r in e.per_rank)
            print(
                f"| {label} | {v} | {e.step_time * 1e3:.1f} | {e.bubble_fraction_of_total:.1%} "
                f"| {exposed * 1e3:.1f} | {e.step_time / base - 1:+.1%} |"
            )


if __name__ == "__main__":
    main()
