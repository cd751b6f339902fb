"""ppir check: parse, expand, lower and verify a schedule."""

from __future__ import annotations

import sys

from ppir.cli.common import (
    add_compile_arguments,
    add_schedule_arguments,
    compile_from_args,
    emit_json,
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

It compiles exactly as 'ppir compile' and 'ppir launch' do (the same lowering, overlap and
cost options), so what it verifies is what runs.

exit status: 0 verified, 1 the schedule is invalid, 2 unusable input or usage.
"""


def add_arguments(p):
    add_schedule_arguments(p)
    p.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="text (default): diagnostics as file:line:col lines; json: the ppir.check/1 report",
    )
    add_compile_arguments(p, model=False)


def run(args) -> int:
    args.no_verify = False
    c = compile_from_args(args)
    s, report = c.program, c.report
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
        for d in report.grouped():
            print(d.render(), file=sys.stderr)
        if ok:
            params = ", ".join(f"{k}={v}" for k, v in s.params)
            n_msgs = len(c.graph.messages)
            print(
                f"ok: {s.name}({params}): {s.ranks} ranks, {s.stages} stages, "
                f"{s.num_compute_ops} compute ops, {n_msgs} messages; deadlock-free under "
                f"rendezvous semantics ({args.progress_model} progress)"
            )
    return EXIT_OK if ok else EXIT_INVALID
