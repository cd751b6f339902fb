"""The ``cost`` backend: print what the estimator found for a compiled program (summary or
``ppir.estimate/2`` JSON), and write Chrome traces and Gantt charts.  Never imports torch.

The estimator itself is part of the compiler (:func:`ppir.estimate`, :mod:`ppir.analysis`);
this backend only presents it.  :data:`BACKEND` is the object ``ppir compile --backend cost``
runs.
"""

from __future__ import annotations

from ppir.backends.cost.backend import BACKEND, CostBackend
from ppir.backends.cost.trace import write_trace


def write_plot(est, path, program=None):  # lazy: keeps matplotlib out of every import
    from ppir.backends.cost.plot import write_plot as _w

    return _w(est, path, program)


__all__ = ["BACKEND", "CostBackend", "write_plot", "write_trace"]
