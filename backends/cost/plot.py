"""``ppir compile --backend cost --plot FILE``: the Gantt chart of the compiled program, the same
chart ``ppir viz --format png|svg|pdf`` writes (:func:`ppir.viz.static.write_chart`; the optional
``viz`` extra's matplotlib, imported lazily: without it a ppir error, exit 2, says how to install
it).
"""

from __future__ import annotations

from ppir.analysis.estimate import Estimate
from ppir.diagnostics import error
from ppir.ir import Schedule
from ppir.viz.static import FORMATS as CHART_FORMATS
from ppir.viz.static import write_chart

FORMATS = tuple(f".{f}" for f in CHART_FORMATS)  # the chart's formats, as file extensions


def write_plot(e: Estimate, path: str, program: Schedule | None = None) -> None:
    """Render the Gantt chart of ``e`` to ``path`` (.png, .svg or .pdf); ``program``, the
    schedule ``e`` times, shades a rank's later chunks as viz does."""
    if not path.lower().endswith(FORMATS):
        raise error(
            "bad-usage",
            f"--plot {path}: unsupported file type",
            hints=[f"use one of {', '.join(FORMATS)}"],
        )
    write_chart([(program, e)], path, path.rsplit(".", 1)[1].lower(), "--plot")
