"""Chrome-trace / Perfetto JSON of an :class:`~.estimate.Estimate`.

One process per rank (``pid`` = rank) with threads ``compute`` (tid 0: F/B/I/W slices named
like ``F3@s5``) and ``comm`` (tid 1: one slice per message on each side, ``SEND_F3@s5 -> r2`` /
``RECV_F3@s6 <- r1``), and with data-parallel gradient reductions ``reduce`` (tid 2: one slice
per reduction, ``REDUCE_GRAD@s5``, a track of its own since it runs beside messages). Each
message also gets a flow arrow from the sender's slice to the receiver's. Timestamps are
microseconds: seconds × 1e6 with a model, and 1 unit = 1000 us without one (so unit-mode traces read
as "1 ms per forward"). Open in https://ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

import json

from ppir.analysis.estimate import Estimate, op_label
from ppir.diagnostics import write_output

TRACE_FORMAT = "ppir.trace/1"


def trace_events(e: Estimate) -> list[dict]:
    """The ``traceEvents`` list."""
    scale = 1e6 if e.time_unit == "s" else 1e3
    ev: list[dict] = []
    for r in range(e.ranks):
        ev.append({"ph": "M", "name": "process_name", "pid": r, "args": {"name": f"rank {r}"}})
        ev.append({"ph": "M", "name": "process_sort_index", "pid": r, "args": {"sort_index": r}})
        for tid, name in ((0, "compute"), (1, "comm"), (2, "reduce"))[: 3 if e.reductions else 2]:
            ev.append(
                {"ph": "M", "name": "thread_name", "pid": r, "tid": tid, "args": {"name": name}}
            )
    for row in e.ops:
        for o in row:
            a = o.action
            ev.append(
                {
                    "ph": "X",
                    "name": op_label(a),
                    "cat": a.kind.value,
                    "pid": o.rank,
                    "tid": 0,
                    "ts": o.start * scale,
                    "dur": (o.end - o.start) * scale,
                    "args": {"stage": a.stage, "microbatch": a.mb, "kind": a.kind.value},
                }
            )
    for red in e.reductions:
        ev.append(
            {
                "ph": "X",
                "name": f"REDUCE_GRAD@s{red.stage}",
                "cat": "reduce",
                "pid": red.rank,
                "tid": 2,  # its own track: it overlaps messages, which slices must not
                "ts": red.start * scale,
                "dur": (red.end - red.start) * scale,
                "args": {"stage": red.stage},
            }
        )
    for n, m in enumerate(e.messages):
        ts, dur = m.start * scale, (m.end - m.start) * scale
        args = {"bytes": m.nbytes, "src": m.src, "dst": m.dst}
        ev.append(
            {
                "ph": "X",
                "name": f"{op_label(m.send)} -> r{m.dst}",
                "cat": "comm",
                "pid": m.src,
                "tid": 1,
                "ts": ts,
                "dur": dur,
                "args": args,
            }
        )
        ev.append(
            {
                "ph": "X",
                "name": f"{op_label(m.recv)} <- r{m.src}",
                "cat": "comm",
                "pid": m.dst,
                "tid": 1,
                "ts": ts,
                "dur": dur,
                "args": args,
            }
        )
        ev.append(
            {"ph": "s", "id": n, "name": "message", "cat": "flow", "pid": m.src, "tid": 1, "ts": ts}
        )
        ev.append(
            {
                "ph": "f",
                "bp": "e",
                "id": n,
                "name": "message",
                "cat": "flow",
                "pid": m.dst,
                "tid": 1,
                "ts": ts,
            }
        )
    return ev


def write_trace(e: Estimate, path: str) -> None:
    """Write the trace file (``displayTimeUnit`` ms; metadata names the schedule)."""
    doc = {
        "traceEvents": trace_events(e),
        "displayTimeUnit": "ms",
        "otherData": {
            "format": TRACE_FORMAT,
            "schedule": e.schedule,
            "params": {k: str(v) for k, v in e.params.items()},
            "time_unit": e.time_unit,
            "assumptions": e.config.describe(ranks=e.ranks),
        },
    }
    write_output(path, json.dumps(doc, separators=(",", ":")))
