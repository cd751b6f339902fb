"""ppir check: parse, expand, lower and verify a schedule."""

from __future__ import annotations

import sys

from ppir.cli.common import (
    add_compile_arguments,
    add_schedule_arguments,
    compile_from_args,
    emit_json,
)
from ppir.diagnostics import EXIT_INVALID, EXIT_OK, PpirError, count

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
    try:
        c = compile_from_args(args)
    except PpirError as e:  # unusable input: JSON readers get the report too, then exit 2
        if args.format == "json":
            emit_json(
                {
                    "format": "ppir.check/1",
                    "schedule": None,
                    "params": None,
                    "ok": False,
                    "diagnostics": [d.to_json() for d in e.diagnostics],
                }
            )
        raise
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
            head = f"ok: {s.name}({params}): {count(s.ranks, 'rank')}, {count(s.stages, 'stage')}, "
            if s.forward_only:
                head += "an evaluation program (forwards only), "
            transfers = 0 if s.is_lowered else _transfers(s)
            if not transfers:  # lowered, or nothing crosses ranks (one rank): runs as it is
                print(
                    f"{head}{count(s.num_compute_ops, 'compute op')}, "
                    f"{count(len(c.graph.messages), 'message')}; "
                    f"deadlock-free under rendezvous semantics ({args.progress_model} progress)"
                )
            else:  # a pipeline without lower-comms (-p overlap-comms): nothing to run yet
                print(
                    f"{head}{count(s.num_compute_ops, 'compute op')}; not lowered: its "
                    f"{count(transfers, 'cross-rank transfer')} "
                    f"{'has' if transfers == 1 else 'have'} no sends and receives (the "
                    "pipeline has no lower-comms), and its compute order is acyclic"
                )
    return EXIT_OK if ok else EXIT_INVALID


def _transfers(s) -> int:
    """The values a compute-only program passes between ranks (what lower-comms turns into
    messages and the estimator's latency model times)."""
    from ppir.ir import deps

    return sum(
        deps.outgoing_message(s.placement, a, s.pipelines) is not None
        for r in range(s.ranks)
        for a in s.actions(r)
        if a.kind.is_compute
    )
