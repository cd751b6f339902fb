"""The ``cost`` backend object behind ``ppir compile SCHEDULE --backend cost``."""

from __future__ import annotations

import json
import sys

from ppir.backends.cost.report import format_summary

from ppir.analysis.estimate import estimate
from ppir.cli.cost_options import (
    add_cost_arguments,
    add_output_arguments,
    config_from_args,
    progress_from_args,
)
from ppir.diagnostics import error, write_output


class CostBackend:
    """Estimate one training step of the verified, lowered schedule; print a summary (or
    ``--format json``, ``ppir.estimate/1``) to stdout or ``-o``; optionally write a trace and a
    Gantt chart."""

    name = "cost"
    help = "estimate step time, bubble, communication and memory (no GPU needed)"

    def add_arguments(self, group) -> None:
        add_cost_arguments(group)
        add_output_arguments(group)

    def run(self, schedule, args) -> int:
        cfg = config_from_args(args)
        est = estimate(schedule, cfg, progress=progress_from_args(args))
        if getattr(args, "format", "text") == "json":
            text = json.dumps(est.to_json(), indent=2) + "\n"
        else:
            text = format_summary(est)
        out = getattr(args, "output", None)
        if out:
            write_output(out, text)
        else:
            sys.stdout.write(text)
        trace = getattr(args, "cost_trace", None)
        if trace:
            from ppir.backends.cost.trace import write_trace

            try:
                write_trace(est, trace)
            except OSError as e:
                raise error("bad-output", f"cannot write {trace}: {e}") from None
        plot = getattr(args, "cost_plot", None)
        if plot:
            from ppir.backends.cost.plot import write_plot

            write_plot(est, plot)
        return 0


BACKEND = CostBackend()
