"""Human-readable summary of an :class:`~.estimate.Estimate` (the JSON form is ``to_json``)."""

from __future__ import annotations

from ppir.analysis.estimate import Estimate, op_label
from ppir.analysis.units import fmt_bytes, fmt_time


def format_summary(e: Estimate, max_path_ops: int = 8) -> str:
    """The summary block and per-rank table printed by ``ppir compile --backend cost``."""
    u = e.time_unit
    t = lambda x: fmt_time(x, u)  # noqa: E731
    params = ", ".join(f"{k}={v}" for k, v in e.params.items())
    unit_note = " units (1 unit = one forward of a full rank share)" if u != "s" else ""
    path = " -> ".join(f"{op_label(o.action)}@r{o.rank}" for o in e.critical_path_ops)
    if len(e.critical_path_ops) > max_path_ops:
        head = e.critical_path_ops[: max_path_ops // 2]
        tail = e.critical_path_ops[-max_path_ops // 2 :]
        path = (
            " -> ".join(f"{op_label(o.action)}@r{o.rank}" for o in head)
            + f" -> ... ({len(e.critical_path_ops) - len(head) - len(tail)} more) -> "
            + " -> ".join(f"{op_label(o.action)}@r{o.rank}" for o in tail)
        )
    mean_idle = sum(r.idle for r in e.per_rank) / max(e.ranks, 1)
    lines = [
        f"{e.schedule}({params}): {e.ranks} ranks, {e.stages} stages, {e.microbatches} "
        "microbatches",
        f"assuming {e.config.describe()}",
        "",
        f"step time                  {t(e.step_time)}{unit_note}",
        f"busiest rank compute       {t(e.busiest)}",
        f"bubble (mean idle / rank)  {t(mean_idle)}",
        f"bubble / total             {e.bubble_fraction_of_total:.2%}   (idle / step time)",
        f"bubble / ideal             {e.bubble_fraction_of_ideal:.2%}   (idle / busy, "
        "Narayanan 2021)",
        f"critical path              {t(e.critical_path)}   ({len(e.critical_path_ops)} ops)",
        f"                           {path}",
        *(
            [
                f"dependency bound           {t(e.dependency_bound)}   (the compute order with "
                "transfer times alone: no lowering of it is faster)"
            ]
            if e.dependency_bound is not None
            else []
        ),
        f"messages                   {e.message_count} ({fmt_bytes(e.message_bytes)})",
        "",
    ]
    mem = any(r.peak_activations is not None for r in e.per_rank)
    membytes = any(r.peak_bytes is not None for r in e.per_rank)
    header = ["rank", "busy", "idle", "exposed comm", "waiting", "idle %", "ops", "sent"]
    if mem:
        header.append("peak act (A)")
    if membytes:
        header.append("peak act bytes")
    rows = [header]
    for r in e.per_rank:
        row = [
            str(r.rank),
            t(r.busy),
            t(r.idle),
            t(r.exposed_comm),
            t(r.waiting),
            f"{r.idle / e.step_time:.1%}" if e.step_time else "-",
            str(r.compute_ops),
            str(r.messages_sent),
        ]
        if mem:
            row.append(f"{r.peak_activations:.4g}" if r.peak_activations is not None else "-")
        if membytes:
            row.append(fmt_bytes(r.peak_bytes) if r.peak_bytes is not None else "-")
        rows.append(row)
    widths = [max(len(row[c]) for row in rows) for c in range(len(header))]
    for row in rows:
        lines.append(
            "  ".join(
                cell.rjust(w) if c else cell.ljust(w)
                for c, (cell, w) in enumerate(zip(row, widths))
            ).rstrip()
        )
    return "\n".join(lines) + "\n"
