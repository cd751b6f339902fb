"""The ``torch-csv`` backend (issue 11): ppir schedules as torch.distributed.pipelining CSV.

Library API::

    from ppir.backends.torch_csv import export_csv
    text = export_csv(schedule, "compute_only")      # or "compute_comms" (lowered + REDUCE_GRAD)

:data:`BACKEND` is what ``ppir compile --backend torch-csv`` runs.  Never imports torch.
"""

from __future__ import annotations

from ppir.backends.torch_csv.backend import BACKEND, FORMATS, TorchCsvBackend, export_csv

__all__ = ["BACKEND", "FORMATS", "TorchCsvBackend", "export_csv"]
