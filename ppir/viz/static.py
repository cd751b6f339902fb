"""Static charts (``ppir viz --format png|svg``) drawn with matplotlib from the cost backend's
Gantt layout (:func:`ppir.viz.layout.gantt_layout`), one panel per run on a shared time
axis.

Contract: :func:`write_image` writes ``path`` in ``fmt`` (png or svg) or raises a ppir error
(exit 2) when matplotlib is missing or the file cannot be written.  matplotlib is imported lazily
with the Agg backend.  :func:`write_chart` is what ``ppir compile --backend cost --plot`` writes
too; :func:`draw_gantt` draws one layout on any matplotlib axes.
"""

from __future__ import annotations

from dataclasses import replace

from ppir.analysis.estimate import Estimate
from ppir.analysis.units import seconds_scale
from ppir.diagnostics import cannot_write, error
from ppir.ir import Schedule
from ppir.viz.build import Timed
from ppir.viz.layout import GanttLayout, gantt_layout

FORMATS = ("png", "svg", "pdf")
DARK_TEXT = {"B"}  # labels on light bars are dark, on the others white


def chunk_shades(schedule: Schedule, e: Estimate) -> dict[tuple[int, float, float], float]:
    """(rank, start, end) of each compute op -> how much darker to draw it: 0 for a rank's first
    chunk (lowest stage) up to 0.3 for its last, so the chunks of interleaved schedules show."""
    out = {}
    for r, row in enumerate(e.ops):
        stages = schedule.stages_of_rank[r]
        if len(stages) > 1:
            for o in row:
                c = stages.index(o.action.stage)
                out[(r, o.start, o.end)] = 0.3 * c / (len(stages) - 1)
    return out


def _darken(color: str, amount: float) -> str:
    if not amount:
        return color
    rgb = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(x * (1 - amount)):02x}" for x in rgb)


def draw_gantt(
    ax, lay: GanttLayout, tmax: float, labels: bool = True, shades: dict | None = None
) -> None:
    """Bars of ``lay`` on ``ax`` (rank 0 on top), x from 0 to ``tmax``, microbatch labels where
    they fit; ``shades`` (from :func:`chunk_shades`) darkens later chunks."""
    n = len(lay.rows)
    width_pts = ax.get_window_extent().width or 600
    per_unit = width_pts / (tmax or 1)
    shades = shades or {}
    groups: dict[tuple[int, str, str], list] = {}  # one broken_barh per row and style
    for b in lay.bars:
        color = _darken(b.color, shades.get((b.row, b.start, b.end), 0) if b.label else 0)
        groups.setdefault((b.row, b.kind, color), []).append((b.start, b.end - b.start))
    for (row, kind, color), spans in groups.items():
        h = 0.3 if kind == "comm" else 0.86
        edge = "white" if kind not in ("idle", "comm") and len(spans) * 4 < width_pts else "none"
        ax.broken_barh(
            spans, (n - 1 - row - h / 2, h), facecolors=color, edgecolors=edge, linewidth=0.6
        )
    if labels:
        fs = 7 if n <= 8 else 5.5
        for b in lay.bars:
            if b.label and (b.end - b.start) * per_unit >= fs * 0.75 * len(b.label) + 2:
                ax.text(
                    (b.start + b.end) / 2,
                    n - 1 - b.row,
                    b.label,
                    ha="center",
                    va="center",
                    fontsize=fs,
                    color="#1d2330" if b.kind in DARK_TEXT else "white",
                )
    ax.set_yticks(range(n))
    ax.set_yticklabels(list(reversed(lay.rows)), fontsize=8)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlim(0, tmax or 1)
    ax.tick_params(axis="x", labelsize=8)
    time_ticks(ax, lay)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.set_title(lay.title, fontsize=9, loc="left")


def time_ticks(ax, lay: GanttLayout) -> None:
    """Tick the time axis in ``lay.time_label``'s unit: seconds as the title writes the step
    (ms, us), so a 15.5 ms step is not ticked 0.000 to 0.014."""
    if lay.time_scale != 1.0:
        from matplotlib.ticker import FuncFormatter

        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / lay.time_scale:g}"))


def write_image(runs: list[Timed], path: str, fmt: str) -> None:
    """One Gantt panel per run (shared time axis), a legend, saved as ``fmt`` to ``path``."""
    write_chart([(t.schedule, t.estimate) for t in runs], path, fmt)


def write_chart(
    runs: list[tuple[Schedule | None, Estimate]], path: str, fmt: str, option: str = ""
) -> None:
    """:func:`write_image` of (program, its estimate) pairs, the chart ``ppir viz --format``
    and ``ppir compile --backend cost --plot`` write (a None program: no chunk shades);
    ``option``: the flag that asked for it, which errors name (default ``--format FMT``)."""
    option = option or f"--format {fmt}"
    if fmt not in FORMATS:
        raise error("bad-usage", f"{option}: expected one of {', '.join(FORMATS)}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        raise error(
            "missing-dependency",
            f"{option} needs matplotlib",
            hints=["pip install 'ppir[viz]' (or pip install matplotlib)"],
        ) from None
    lays = [gantt_layout(e) for _, e in runs]
    tmax = max(lay.step_time for lay in lays) or 1
    if lays[0].time_unit == "s":  # one axis unit for every panel: the longest step's
        scale, suffix = seconds_scale(tmax)
        lays = [replace(lay, time_scale=scale, time_label=f"time ({suffix})") for lay in lays]
    rows = [len(lay.rows) for lay in lays]
    width = 9.0 if max(rows) <= 8 else 12.0
    heights = [0.55 + 0.28 * n for n in rows]
    fig, axes = plt.subplots(
        len(lays),
        1,
        figsize=(width, sum(heights) + 0.7),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    fig.canvas.draw()  # sizes the axes, so labels can be fitted to bar widths
    for ax, lay, (s, e) in zip(axes[:, 0], lays, runs):
        draw_gantt(
            ax,
            lay,
            tmax,
            labels=sum(rows) * len(lay.bars) < 200_000,
            shades=chunk_shades(s, e) if s is not None else None,
        )
    axes[-1, 0].set_xlabel(lays[0].time_label, fontsize=8)
    legend: dict[str, str] = {}
    for lay in lays:
        legend.update(dict(lay.legend))
    names = {
        "F": "forward",
        "B": "backward",
        "I": "backward-input",
        "W": "backward-weight",
        "comm": "exposed comm",
        "idle": "idle",
    }
    handles = [Patch(color=c, label=names.get(k, k)) for k, c in legend.items()]
    if any(s is not None and s.stages > s.ranks for s, _ in runs):
        handles.append(
            Patch(color=_darken(legend.get("F", "#0072B2"), 0.3), label="darker: later chunk")
        )
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=7.5, frameon=False)
    fig.tight_layout(rect=(0, 0.06 if len(lays) == 1 and rows[0] <= 4 else 0.035, 1, 1))
    try:
        fig.savefig(path, format=fmt, dpi=110)
    except OSError as ex:
        raise cannot_write(path, ex) from None
    finally:
        plt.close(fig)
