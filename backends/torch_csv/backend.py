"""The ``torch-csv`` backend: write a ppir schedule as a torch.distributed.pipelining CSV.

``ppir compile SCHEDULE --backend torch-csv -o out.csv [--csv-format compute_comms]``

Contract
--------
* ``compute_only`` (default): one row per rank, the rank's compute actions (F, B, I, W) in
  program order.  torch's ``_PipelineScheduleRuntime._load_csv(path, "compute_only")`` inserts
  its own SEND/RECV, UNSHARD/RESHARD and REDUCE_GRAD.  Reading the file back with ppir gives the
  same compute programs and placement (the round trip is the identity).
* An overlapped step (:class:`ppir.ir.Overlap`, DualPipeV's F&B) is one cell in both formats,
  in torch's spelling ``(0F7;7B3)OVERLAP_F_B``, which torch's ``_Action.from_str`` reads back.
* ``compute_comms``: ppir's verified lowering with each group flattened (torch's CSV has no
  groups) by :func:`ppir.frontend.csvio.flatten_groups`, which keeps the result deadlock-free
  under ppir's rendezvous semantics, plus ``sREDUCE_GRAD`` after each stage's last backward:
  without it torch leaves gradients M times too large.  torch takes this format verbatim, so ppir's
  communication order is what runs.
* Never imports torch.
"""

from __future__ import annotations

import sys

from ppir.diagnostics import error, write_output
from ppir.frontend.csvio import flatten_groups, message_key, write_csv
from ppir.ir import Schedule

FORMATS = ("compute_only", "compute_comms")
__all__ = ["BACKEND", "FORMATS", "export_csv", "flatten_groups", "message_key"]


def export_csv(schedule: Schedule, csv_format: str = "compute_only") -> str:
    """The CSV text of ``schedule`` in torch's ``csv_format`` (see the module contract)."""
    if csv_format not in FORMATS:
        raise ValueError(f"unknown torch CSV format {csv_format!r} (expected {FORMATS})")
    if schedule.pipelines > 1:
        raise error(
            "unsupported",
            f"{schedule.name} runs {schedule.pipelines} pipelines; torch.distributed.pipelining "
            "runs one (its CSV cannot say that a stage starts a second pipeline)",
            exit_code=2,
        )
    if schedule.forward_only:
        raise error(
            "unsupported",
            f"{schedule.name} is an evaluation program (forward_only); torch's schedule CSV "
            "cannot say so: export the training schedule (torch.distributed.pipelining "
            "evaluates with its schedule's eval())",
            exit_code=2,
        )
    if csv_format == "compute_only":
        return write_csv(schedule, compute_only=True)
    return write_csv(flatten_groups(schedule), compute_only=False, reduce_grad=True)


class TorchCsvBackend:
    """Write the verified, lowered schedule as torch CSV to ``-o`` (or stdout)."""

    name = "torch-csv"
    runs_deferred_groups = False  # torch's CSV has no groups or waits: overlap-comms is skipped
    help = "write a torch.distributed.pipelining schedule CSV (_PipelineScheduleRuntime._load_csv)"

    def add_arguments(self, group) -> None:
        group.add_argument(
            "--csv-format",
            choices=FORMATS,
            default="compute_only",
            help="torch-csv: compute_only (default; torch inserts the comms) or "
            "compute_comms (ppir's verified comms, with REDUCE_GRAD)",
        )

    def run(self, compiled, args) -> int:
        schedule = compiled.program
        fmt = getattr(args, "csv_format", "compute_only")
        text = export_csv(schedule, fmt)
        out = getattr(args, "output", None)
        if not out:
            sys.stdout.write(text)
            return 0
        for suffix, what in ((".pps", "a .pps schedule"), (".json", "a ppir.program/1 JSON")):
            if out.lower().endswith(suffix):  # ppir would read the CSV back as that
                raise error(
                    "bad-usage",
                    f"-o {out}: --backend torch-csv writes torch's CSV, and ppir reads a "
                    f"{suffix} file as {what}",
                    hints=["name the output .csv"],
                )
        write_output(out, text)
        print(
            f"wrote {out}: {schedule.ranks} rows ({fmt}); load it with "
            f"_PipelineScheduleRuntime._load_csv({out!r}, format={fmt!r})"
        )
        return 0


BACKEND = TorchCsvBackend()
