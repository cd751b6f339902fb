"""ppir check: parse, expand, lower and verify a schedule."""

from __future__ import annotations

import sys

from ppir.cli.common import (
    add_planning_arguments,
    add_schedule_arguments,
    emit_json,
    lowered_from_args,
)
from ppir.diagnostics import EXIT_INVALID, EXIT_OK

NAME = "check"
HELP = "parse, expand, lower and verify a schedule (deadlock, matching, completeness)"
DESCRIPTION = """Parse and expand a schedule for the given parameters, lower its communication
and verify it under NCCL point-to-point semantics: every (stage, microbatch) forward and backward
exactly once, data dependencies respected, sends and recvs matched FIFO per channel, and no
deadlock when sends are rendezvous and groups complete as a unit.

examples:
  ppir check 1f1b -D P=4 -D M=8
  ppir check interleaved_1f1b -D P=4 -D M=8 -D v=2 --format json
  ppir check 1f1b --lowering naive        # see why naive lowering deadlocks

exit status: 0 verified, 1 the schedule is invalid, 2 unusable input or usage.
"""


def add_arguments(p):
    add_schedule_arguments(p)
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--strict", action="store_true", help="treat warnings (lints) as errors")
    p.add_argument(
        "--progress",
        choices=["fifo", "relaxed"],
        default="fifo",
        help="progress model: one FIFO of groups per rank (default, conservative) "
        "or independent progress per peer channel (relaxed)",
    )
    add_planning_arguments(p)


def run(args) -> int:
    s = lowered_from_args(args)
    from ppir.verify import verify  # after expansion: its errors need no verifier

    report = verify(s, progress=args.progress, strict=args.strict)
    ok = report.ok
    if args.format == "json":
        emit_json(
            {
                "format": "ppir.check/1",
                "schedule": s.name,
                "params": dict(s.params),
                "ok": ok,
                "diagnostics": [d.to_json() for d in report.diagnostics],
            }
        )
    else:
        for d in report.diagnostics:
            print(d.render(), file=sys.stderr)
        if ok:
            params = ", ".join(f"{k}={v}" for k, v in s.params)
            n_msgs = sum(1 for r in range(s.ranks) for a in s.actions(r) if a.kind.is_send)
            print(
                f"ok: {s.name}({params}): {s.ranks} ranks, {s.stages} stages, "
                f"{s.num_compute_ops} compute ops, {n_msgs} messages; deadlock-free under "
                f"rendezvous semantics ({args.progress} progress)"
            )
    return EXIT_OK if ok else EXIT_INVALID
