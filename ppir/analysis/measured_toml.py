"""The ``[measured]`` table of a cost file as TOML text (:meth:`MeasuredCosts.to_toml`)."""

from __future__ import annotations

from ppir.analysis.measured import SECTION, MeasuredCosts


def table_text(m: MeasuredCosts, comment: str = "") -> str:
    """``m`` as a ``[measured]`` table, after ``comment`` (one ``#`` line per line), readable
    by :func:`ppir.analysis.measured.from_table`."""
    lines = [f"# {c}" for c in comment.splitlines()] + [f"[{SECTION}]"]
    order = dict(m.order)
    for k, v in m.info:
        lines.append(f"{k} = {_toml(v)}")
    lines.append(f"stages = {m.stages}")
    for k in ("F", "B", "I", "W", "W_late", "FB", "processor_share"):
        if getattr(m, k):
            lines.append(f"{k} = {_toml(list(getattr(m, k)))}")
    for k, xs in order.items():
        lines.append(f"{k} = {_toml(list(xs))}")
    lines.append(f"transfer = {_toml(m.transfer)}")
    if m.post:
        lines.append(f"post = {_toml(m.post)}")
    if m.post_wall:
        lines.append(f"post_wall = {_toml(m.post_wall)}")
    if m.oversubscription:
        lines.append(f"oversubscription = {_toml(m.oversubscription)}")
    for k in (
        "message_bytes",
        "activation_bytes",
        "param_bytes",
        "frozen_bytes",
        "optimizer_bytes",
    ):
        if getattr(m, k):
            lines.append(f"{k} = {_toml(list(getattr(m, k)))}")
    if m.shared:
        lines.append(f"shared = [{', '.join(e.to_toml() for e in m.shared)}]")
    return "\n".join(lines) + "\n"


def _toml(v) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    return str(v)
