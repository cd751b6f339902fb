"""See a schedule: the self-contained interactive HTML page and static charts of ``ppir viz``.

Library API::

    from ppir.viz import time_schedule, render_html, write_image
    runs = [time_schedule(schedule)]            # estimator timeline + memory analysis
    html = render_html(runs)                    # one file, no network: canvas + inline JS/CSS
    write_image(runs, "1f1b.png", "png")        # matplotlib, from the cost backend's layout

* :mod:`.build`: :func:`time_schedule` and :class:`Timed`.
* :mod:`.data`: the compact ``ppir.viz/2`` JSON the page embeds (flat arrays, see its docstring).
* :mod:`.html`: the page (``page.html``, ``page.css``, ``model.js``, ``draw.js``, ``app.js`` are
  package data).
* :mod:`.static`: PNG / SVG / PDF through :func:`ppir.viz.layout.gantt_layout`.
"""

from __future__ import annotations

from ppir.viz.build import Timed, time_schedule
from ppir.viz.data import FORMAT, run_data
from ppir.viz.html import render_html

__all__ = ["FORMAT", "Timed", "render_html", "run_data", "time_schedule", "write_image"]


def write_image(runs, path, fmt):  # lazy: keeps matplotlib out of every import
    from ppir.viz.static import write_image as _w

    return _w(runs, path, fmt)
