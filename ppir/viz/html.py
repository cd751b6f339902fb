"""Render the self-contained HTML page: the template, its CSS and JS (package data) and the runs
embedded as JSON.

Contract: :func:`render_html` returns one HTML document that needs no network (no CDN, no fonts,
no images fetched); the data sits in ``<script type="application/json" id="ppir-data">`` with
every ``<`` written as ``\\u003c``, so no value can close the script element early.
"""

from __future__ import annotations

import json
import re
from importlib import resources

from ppir.viz.build import Timed
from ppir.viz.data import page_data, run_data

JS_FILES = ("model.js", "draw.js", "app.js")  # concatenated in this order, in one scope
_SLOT = re.compile(r"__(CSS|TITLE|DATA|JS)__")


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def page_json(runs: list[Timed], initial: dict | None = None) -> str:
    """The embedded JSON (compact separators), safe inside a script element."""
    data = page_data([run_data(t.schedule, t.estimate, t.memory) for t in runs])
    data["initial"] = dict(initial or {})
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c")  # "<" only occurs inside JSON strings


def render_html(runs: list[Timed], initial: dict | None = None) -> str:
    """The page for one run, or two side by side on the same time axis.

    ``initial`` may set ``view`` (global | local), ``mode`` (static | dynamic) and ``rank``.
    """
    js = "(function () {\n" + "\n".join(_asset(f) for f in JS_FILES) + "\n})();"
    title = " vs ".join(run_data_label(t) for t in runs)
    values = {
        "CSS": _asset("page.css"),
        "TITLE": _escape(title),
        "DATA": page_json(runs, initial),
        "JS": js,
    }
    # one pass, so no inserted text is ever searched for another placeholder
    return _SLOT.sub(lambda m: values[m.group(1)], _asset("page.html"))


def run_data_label(t: Timed) -> str:
    params = ", ".join(f"{k}={v}" for k, v in t.estimate.params.items())
    return f"{t.estimate.schedule}({params})" if params else t.estimate.schedule


def _escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
