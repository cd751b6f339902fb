"""Draw a :class:`~.layout.GanttLayout` with matplotlib (the optional ``viz`` extra).

matplotlib is imported only here, lazily, with the non-interactive Agg backend; without it
:func:`write_plot` raises a ppir error (exit 2) saying how to install it.
"""

from __future__ import annotations

from ppir.analysis.estimate import Estimate
from ppir.diagnostics import cannot_write, error
from ppir.viz.layout import gantt_layout

FORMATS = (".png", ".svg", ".pdf")


def write_plot(e: Estimate, path: str) -> None:
    """Render the Gantt chart of ``e`` to ``path`` (.png, .svg or .pdf)."""
    if not path.lower().endswith(FORMATS):
        raise error(
            "bad-usage",
            f"--plot {path}: unsupported file type",
            hints=[f"use one of {', '.join(FORMATS)}"],
        )
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        raise error(
            "missing-dependency",
            "--plot needs matplotlib",
            hints=["pip install 'ppir[viz]' (or pip install matplotlib)"],
        ) from None
    lay = gantt_layout(e)
    n = len(lay.rows)
    fig, ax = plt.subplots(figsize=(min(24, 6 + 0.06 * len(lay.bars) / max(n, 1)), 1.2 + 0.45 * n))
    label_min = lay.step_time / 60 if lay.step_time else 0
    for b in lay.bars:
        y = n - 1 - b.row
        h = 0.3 if b.kind == "comm" else 0.8
        ax.broken_barh(
            [(b.start, b.end - b.start)],
            (y - h / 2, h),
            facecolors=b.color,
            edgecolors="white" if b.kind not in ("idle", "comm") else "none",
            linewidth=0.4,
        )
        if b.label and b.end - b.start >= label_min and n * len(lay.bars) < 40000:
            ax.text(
                (b.start + b.end) / 2,
                y,
                b.label,
                ha="center",
                va="center",
                fontsize=6,
                color="white",
            )
    ax.set_yticks(range(n))
    ax.set_yticklabels(list(reversed(lay.rows)))
    ax.set_xlim(0, lay.step_time or 1)
    ax.set_xlabel(lay.time_label)
    ax.set_title(lay.title, fontsize=9)
    ax.legend(
        handles=[Patch(color=c, label=k) for k, c in lay.legend],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.25 if n < 6 else -0.08),
        ncol=len(lay.legend),
        fontsize=7,
        frameon=False,
    )
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=150)
    except OSError as ex:
        raise cannot_write(path, ex) from None
    finally:
        plt.close(fig)
