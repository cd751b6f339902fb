"""torch.distributed.pipelining schedule CSV files (``compute_only`` and ``compute_comms``).

One row per rank, one cell per action in torch's action text (``2F0``, ``1I3``, ``3SEND_F1``);
an empty cell is an idle slot and is dropped.  Diagnostics name ``file:row:col`` (col is the
character column of the cell).
"""

from __future__ import annotations

import csv
import io
import os

from .diagnostics import error, register_source
from .expand import infer_placement
from .ir import Action, Schedule, Span


def read_csv_text(text: str, path: str, placement: tuple[int, ...] | None = None,
                  name: str | None = None) -> Schedule:
    """Parse CSV text into a Schedule; placement is inferred unless given."""
    register_source(path, text)
    programs: list[list[Action]] = []
    for row_no, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        acts: list[Action] = []
        col = 1
        for cell in row:
            stripped = cell.strip()
            if stripped:
                start = col + (len(cell) - len(cell.lstrip()))
                span = Span(path, row_no, start, row_no, start + len(stripped))
                try:
                    acts.append(Action.parse(stripped, span))
                except ValueError:
                    hint = ("compound actions such as (0F1;1B0)OVERLAP_F_B are not supported"
                            if "OVERLAP" in stripped or ";" in stripped else
                            "cells hold torch action text: stage, kind, microbatch, e.g. 2F0")
                    raise error("csv-bad-action", f"unknown action {stripped!r} in row {row_no}",
                                span, hints=[hint]) from None
            col += len(cell) + 1
        programs.append(acts)
    while programs and not programs[-1]:
        programs.pop()
    if not programs:
        raise error("csv-empty", f"{path}: the CSV holds no actions",
                    Span(path, 1, 1, 1, 2))
    ranks = len(programs)
    all_actions = [(r, a) for r, p in enumerate(programs) for a in p]
    stages = max(a.stage for _, a in all_actions) + 1
    mbs = max(a.mb for _, a in all_actions) + 1
    if placement is None:
        placement = infer_placement(ranks, stages, all_actions)
    else:
        if len(placement) != stages:
            raise error("bad-placement", f"--placement lists {len(placement)} ranks but the CSV "
                        f"uses {stages} stages")
        for r, a in all_actions:
            if a.kind.is_compute and placement[a.stage] != r:
                raise error("placement-conflict",
                            f"{a} runs on rank {r} but --placement puts stage {a.stage} on "
                            f"rank {placement[a.stage]}", a.span)
    stem = name or os.path.splitext(os.path.basename(path))[0]
    return Schedule(stem, (), ranks, stages, mbs, tuple(placement),
                    tuple(tuple(p) for p in programs), path)


def write_csv(schedule: Schedule, compute_only: bool = True) -> str:
    """The schedule as torch CSV text (groups are flattened; torch has no group syntax)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for r in range(schedule.ranks):
        acts = schedule.actions(r)
        w.writerow([str(a) for a in acts if not compute_only or a.kind.is_compute])
    return buf.getvalue()
