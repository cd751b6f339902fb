"""The cost-model backend: time a schedule before it runs (issue 5).  Never imports torch.

Library API::

    from ppir.backends.cost import CostConfig, estimate, make_config
    est = estimate(schedule)                      # textbook: F=1 B=2 I=1 W=1, free comm
    est = estimate(schedule, make_config({"model": {"preset": "llama3-8b"},
                                          "hardware": {"preset": "H100"}}))
    est.step_time, est.bubble_fraction_of_total, est.per_rank[0].idle, est.ops[r]

* :func:`estimate` -> :class:`Estimate` (see :mod:`.estimate` for every definition);
  ``Estimate.to_json()`` is the versioned ``ppir.estimate/1`` object.
* :class:`CostConfig`, :func:`make_config` (validated from a TOML-shaped dict),
  :data:`HARDWARE` presets (:mod:`.config`); :func:`simulate` (:mod:`.simulate`) is the engine.
* :func:`gantt_layout` (:mod:`.layout`) for drawing; :func:`write_trace`, :func:`write_plot`.
* :func:`tune` (:mod:`.tune`) searches schedules x v x microbatch size under a memory budget.
* :data:`BACKEND`: the object ``ppir compile --backend cost`` runs.
"""

from __future__ import annotations

from .backend import BACKEND, CostBackend
from .config import HARDWARE, CostConfig, Hardware, Link, load_config_file, make_config
from .estimate import FORMAT, Estimate, MessageTiming, OpTiming, RankEstimate, estimate, op_label
from .layout import Bar, GanttLayout, gantt_layout
from .simulate import Timeline, simulate
from .tables import CostTables, build_tables
from .trace import write_trace


def write_plot(est, path):  # lazy: keeps matplotlib out of every import
    from .plot import write_plot as _w

    return _w(est, path)


__all__ = [
    "BACKEND",
    "Bar",
    "CostBackend",
    "CostConfig",
    "CostTables",
    "Estimate",
    "FORMAT",
    "GanttLayout",
    "HARDWARE",
    "Hardware",
    "Link",
    "MessageTiming",
    "OpTiming",
    "RankEstimate",
    "Timeline",
    "build_tables",
    "estimate",
    "gantt_layout",
    "load_config_file",
    "make_config",
    "op_label",
    "simulate",
    "write_plot",
    "write_trace",
]
