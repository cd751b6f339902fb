"""The ``cost`` backend object behind ``ppir compile SCHEDULE --backend cost``: it presents
the estimate of the compiled program (:attr:`ppir.pipeline.Compiled.estimate`)."""

from __future__ import annotations

import json
import sys

from ppir.backends.cost.report import format_summary, microbatch_note, peak_note, split_note

from ppir.cli.argtypes import output_path
from ppir.diagnostics import write_output


class CostBackend:
    """Print the estimate of one training step of the compiled program (a summary, or
    ``--format json``, ``ppir.estimate/2``) to stdout or ``-o``; optionally write a trace and a
    Gantt chart.  The cost options themselves belong to the compile (they plan the lowering
    too)."""

    name = "cost"
    help = "estimate step time, bubble, communication and memory (no GPU needed)"

    def add_arguments(self, group) -> None:
        group.add_argument(
            "--trace",
            dest="cost_trace",
            type=output_path,
            metavar="PATH",
            help="write a Chrome-trace / Perfetto JSON timeline (one track per rank)",
        )
        group.add_argument(
            "--plot",
            dest="cost_plot",
            type=plot_path,
            metavar="PATH",
            help="write a Gantt chart (.png, .svg or .pdf; needs matplotlib, the 'viz' extra)",
        )

    def run(self, compiled, args) -> int:
        est = compiled.estimate
        cfg = compiled.config
        from ppir.analysis.measured_footprint import whole_memory

        # whole per-rank memory: from the model, or from the sizes 'ppir profile' measured
        fp = whole_memory(compiled.program, cfg, compiled.memory, recompute=cfg.recompute)
        if getattr(args, "format", "text") == "json":
            doc = est.to_json()
            if fp is not None:
                from ppir.cli.footprint_view import footprint_json

                doc["footprint"] = footprint_json(fp)
                for row, r in zip(doc["per_rank"], fp.per_rank):
                    row["memory"] = r.to_json()
            if compiled.dp_reduce is not None:  # the text's 'data-parallel reduce' lines
                doc["dp_reduce"] = compiled.dp_reduce.to_json()
            text = json.dumps(doc, indent=2) + "\n"
        else:
            from ppir.cli.common import compile_again

            again = lambda costs: compile_again(args, compiled, costs)  # noqa: E731
            text = format_summary(est) + peak_note(compiled, est)
            text += split_note(compiled, again) + microbatch_note(compiled)
            if fp is not None:
                from ppir.cli.footprint_view import footprint_lines

                text += "\n" + "\n".join(footprint_lines(fp)) + "\n"
            if compiled.dp_reduce is not None:
                from ppir.analysis.units import fmt_time

                unit = est.time_unit
                text += compiled.dp_reduce.describe(lambda x: fmt_time(x, unit)) + "\n"
        out = getattr(args, "output", None)
        # each file written is said, as viz and the other backends say theirs: on stdout when
        # the report went to -o, else on stderr (stdout is the report, JSON perhaps)
        said = sys.stdout if out else sys.stderr
        if out:
            write_output(out, text)
            print(f"wrote {out}", file=said)
        else:
            sys.stdout.write(text)
        trace = getattr(args, "cost_trace", None)
        if trace:
            from ppir.backends.cost.trace import write_trace

            write_trace(est, trace)  # a ppir error naming the path when it cannot be written
            print(f"wrote {trace} (a Chrome trace: open it in ui.perfetto.dev)", file=said)
        plot = getattr(args, "cost_plot", None)
        if plot:
            from ppir.backends.cost.plot import write_plot

            write_plot(est, plot, compiled.program)
            print(f"wrote {plot}", file=said)
        return 0


BACKEND = CostBackend()


def plot_path(text: str) -> str:
    """:func:`~ppir.cli.argtypes.output_path` of a chart format matplotlib writes (.png, .svg,
    .pdf), checked before the schedule is compiled."""
    import argparse

    from ppir.backends.cost.plot import FORMATS

    path = output_path(text)
    if not path.lower().endswith(FORMATS):
        raise argparse.ArgumentTypeError(
            f"{path}: unsupported chart type (use one of {', '.join(FORMATS)})"
        )
    return path
