"""torch.distributed.pipelining schedule CSV files (``compute_only`` and ``compute_comms``).

Reading
    One row per rank, one cell per action in torch's action text (``2F0``, ``1I3``,
    ``3SEND_F1``).  Rows may differ in length (torch does not pad them) and an empty cell is an
    idle slot, dropped.  Blank rows at the end of the file are ignored; a blank row elsewhere is
    a rank with no actions.  torch's bookkeeping actions (``0UNSHARD``, ``0RESHARD``,
    ``0REDUCE_GRAD``: no microbatch) are accepted and dropped, since ppir has nothing to order
    them by.  An overlapped cell ``(0F7;7B3)OVERLAP_F_B`` becomes an overlapped step
    (:class:`ppir.ir.Overlap`), or its sub-actions in order when they are not a forward then a
    backward (see :func:`expand_overlap`).  Everything else is a diagnostic at
    ``file:row:col`` (col = the character column of the cell): an unknown action kind, a
    missing stage or microbatch, a negative index, an index no schedule of this size can use,
    or trailing text after an action (torch's own parser silently ignores ``2F0x``).
Writing
    :func:`write_csv` writes what ``_PipelineScheduleRuntime._load_csv`` reads.
"""

from __future__ import annotations

import csv
import io
import os
import re

from ppir.diagnostics import count, error
from ppir.frontend.limits import int_literal
from ppir.frontend.literal import infer_placement
from ppir.ir import Action, Group, OpKind, Overlap, Reduce, Schedule, Span, Wait, deps, item_actions

# torch's kinds, longest first; the bookkeeping ones carry no microbatch.
_KINDS = (
    "REDUCE_GRAD",
    "UNSHARD",
    "RESHARD",
    "SEND_F",
    "RECV_F",
    "SEND_B",
    "RECV_B",
    "F",
    "B",
    "I",
    "W",
)
BOOKKEEPING = frozenset({"REDUCE_GRAD", "UNSHARD", "RESHARD"})
_CELL_RE = re.compile(r"(-?\d*)(" + "|".join(_KINDS) + r")(-?\d*)(.*)$", re.S)
_OVERLAP_RE = re.compile(r"\((.*)\)OVERLAP_F_B(.*)$", re.S)
_HINT = "cells hold torch action text: stage, kind, microbatch, e.g. 2F0"


def _sub_span(span: Span, start: int, length: int) -> Span:
    col = span.col + start
    return Span(span.path, span.line, col, span.line, col + max(length, 1), span.source)


def expand_overlap(text: str, span: Span) -> list[Action | Overlap] | None:
    """The items of an overlapped cell ``(a;b)OVERLAP_F_B``; None for any other cell.

    A forward then a backward (B or I) of the cell's rank is one overlapped step
    (:class:`ppir.ir.Overlap`, DualPipe's F&B, as ppir's own ``dualpipev`` writes it).  Other
    compute sub-actions (two forwards, a backward first, more than two) have no ppir step of
    their own: they become the sub-actions in order, as torch's runtime runs a cell it has no
    custom OVERLAP_F_B function for.  A communication sub-action is a diagnostic.
    """
    m = _OVERLAP_RE.match(text)
    if not m:
        return None
    if m.group(2).strip():
        raise error(
            "csv-bad-action",
            f"trailing text {m.group(2)!r} after OVERLAP_F_B",
            _sub_span(span, m.start(2), len(m.group(2))),
            hints=[_HINT],
        )
    out: list[Action] = []
    offset = 1
    for part in m.group(1).split(";"):
        lead = len(part) - len(part.lstrip())
        sub = parse_cell(part.strip(), _sub_span(span, offset + lead, len(part.strip())))
        if len(sub) != 1 or not sub[0].kind.is_compute:
            raise error(
                "csv-bad-action",
                f"OVERLAP_F_B holds {part.strip()!r}; it overlaps compute actions only",
                _sub_span(span, offset, len(part)),
            )
        out.extend(sub)
        offset += len(part) + 1
    if len(out) == 2 and out[0].kind is OpKind.F and out[1].kind.is_backward:
        return [Overlap((out[0], out[1]), span)]
    return out


def parse_cell(text: str, span: Span) -> list[Action | Overlap]:
    """The ppir items of one non-empty, stripped cell: actions (none for bookkeeping actions)
    or an overlapped step."""
    if text.startswith("("):
        acts = expand_overlap(text, span)
        if acts is not None:
            return acts
    m = _CELL_RE.match(text)
    if not m:
        fix = _CELL_RE.match(text.upper())  # torch's kinds are upper case: '1b1' is 1B1
        ok = fix and fix.group(1).isdigit() and not fix.group(4)
        case = [f"did you mean {text.upper()!r}?"] if ok else []
        if text in ("None", "none", "null", "-", "nan"):  # a dataframe's empty cell
            case = [f"a step with no action is an empty cell (',,'), not {text!r}"]
        raise error(
            "csv-bad-action",
            f"unknown action {text!r} in row {span.line}",
            span,
            hints=[*case, _HINT],
        )
    stage, kind, mb, rest = m.groups()
    if not stage or stage.startswith("-"):
        what = "has no stage index" if not stage else f"has a negative stage index {stage}"
        raise error(
            "csv-bad-index",
            f"{text!r} {what}",
            _sub_span(span, 0, len(stage)),
            hints=["stage indices are 0, 1, 2, ... and come first, e.g. 2F0"],
        )
    if kind in BOOKKEEPING:
        if mb:
            raise error(
                "csv-bad-index",
                f"{stage}{kind} takes no microbatch, got {mb}",
                _sub_span(span, m.start(3), len(mb)),
            )
    elif not mb or mb.startswith("-"):
        what = "has no microbatch index" if not mb else f"has a negative microbatch index {mb}"
        raise error(
            "csv-bad-index",
            f"{text!r} {what}",
            _sub_span(span, m.start(3), len(mb)),
            hints=[f"{kind} needs a microbatch: {stage}{kind}0, {stage}{kind}1, ..."],
        )
    if rest:
        tail = _sub_span(span, m.start(4), len(rest))
        raise error(
            "csv-bad-action",
            f"trailing text {rest!r} after {stage}{kind}{mb}",
            tail,
            hints=[_HINT + " (one action per cell)", "torch's own parser silently drops this text"],
        )
    if kind in BOOKKEEPING:
        return []
    st = int_literal(stage, _sub_span(span, 0, len(stage)))
    return [Action(st, OpKind(kind), int_literal(mb, _sub_span(span, m.start(3), len(mb))), span)]


def parse_rows(
    rows: list[list[str]], path: str, text: str, sep_width: int = 1
) -> list[list[Action | Overlap]]:
    """Parse rows of cells (row i = rank i); trailing blank rows are dropped.

    Columns are counted as if cells were joined by ``sep_width`` characters, as in the source.
    """
    programs: list[list[Action | Overlap]] = []
    for row_no, row in enumerate(rows, start=1):
        acts: list[Action | Overlap] = []
        col = 1
        for cell in row:
            stripped = cell.strip()
            if stripped:
                start = col + (len(cell) - len(cell.lstrip()))
                acts.extend(
                    parse_cell(
                        stripped, Span(path, row_no, start, row_no, start + len(stripped), text)
                    )
                )
            col += len(cell) + sep_width
        programs.append(acts)
    while programs and not programs[-1]:
        programs.pop()
    if not programs:
        raise error("csv-empty", "the file holds no actions", Span(path, 1, 1, 1, 2, text))
    return programs


def build_schedule(
    programs: list[list[Action | Overlap]],
    path: str,
    placement: tuple[int, ...] | None = None,
    name: str | None = None,
    microbatches: int | None = None,
    params: tuple[tuple[str, int], ...] = (),
    option: str = "--placement",
    rows: list[Span] | None = None,
) -> Schedule:
    """A Schedule from parsed per-rank items; placement inferred unless given (``option`` is
    how errors name it: the CLI's ``--placement``, the API's ``placement``; ``rows``: where
    each rank's row is, for :func:`infer_placement`)."""
    ranks = len(programs)
    all_actions = [(r, a) for r, p in enumerate(programs) for it in p for a in item_actions(it)]
    limit = max(len(all_actions), microbatches or 0)
    for _, a in all_actions:  # an index no schedule with this many actions can use
        for what, value in (("stage", a.stage), ("microbatch", a.mb)):
            if value >= limit:
                raise error(
                    "csv-bad-index",
                    f"{what} index {value} of {a} is out of range: "
                    f"{path} holds {len(all_actions)} actions",
                    a.span,
                )
    stages = max(a.stage for _, a in all_actions) + 1
    mbs = microbatches if microbatches is not None else max(a.mb for _, a in all_actions) + 1
    if placement is None:
        placement = infer_placement(ranks, stages, all_actions, rows=rows)
    else:
        _check_placement(placement, ranks, stages, all_actions, option)
    stem = name or _stem_name(path)
    return Schedule(
        stem,
        params,
        ranks,
        len(placement),
        mbs,
        tuple(placement),
        tuple(tuple(p) for p in programs),
        path,
    )


def _stem_name(path: str) -> str:
    """The file's stem as a schedule name a .pps header can hold (``my sched.csv`` ->
    ``my_sched``), so that the schedule can be written out."""
    from ppir.ir.printer import SCHEDULE_NAME

    stem = os.path.splitext(os.path.basename(path))[0]
    if SCHEDULE_NAME.fullmatch(stem):
        return stem
    from ppir.frontend.parser import to_schedule_name  # builds the parser: only when needed

    return to_schedule_name(stem)


def _check_placement(placement, ranks, stages, all_actions, option: str) -> None:
    if len(placement) != stages:  # a stage beyond the last one used would run nothing
        raise error(
            "bad-placement",
            f"{option} lists {count(len(placement), 'stage')} but the schedule uses "
            f"{count(stages, 'stage')} (0..{stages - 1})",
        )
    for s, r in enumerate(placement):
        if not 0 <= r < ranks:
            raise error(
                "bad-placement",
                f"{option} puts stage {s} on rank {r}, but the "
                f"schedule has {count(ranks, 'rank')} (one per row)",
            )
    for r, a in all_actions:
        if a.kind.is_compute and placement[a.stage] != r:
            raise error(
                "placement-conflict",
                f"{a} runs on rank {r} but {option} puts stage {a.stage} on "
                f"rank {placement[a.stage]}",
                a.span,
            )


def read_csv_text(
    text: str,
    path: str,
    placement: tuple[int, ...] | None = None,
    name: str | None = None,
    microbatches: int | None = None,
    params: tuple[tuple[str, int], ...] = (),
    option: str = "--placement",
) -> Schedule:
    """Parse torch CSV text into a Schedule (see the module docstring for what is accepted;
    ``option`` names the placement in errors, as for :func:`build_schedule`)."""
    reader = csv.reader(io.StringIO(text), strict=True)
    try:
        rows = list(reader)
    except csv.Error as e:
        line = reader.line_num
        raise error(
            "csv-syntax",
            f"malformed CSV: {e}",
            Span(path, line, 1, line, 2, text),
            hints=["cells hold plain action text; torch never quotes them"],
        ) from None
    programs = parse_rows(rows, path, text)
    at = [Span(path, r, 1, r, 2, text) for r in range(1, len(programs) + 1)]
    return build_schedule(programs, path, placement, name, microbatches, params, option, at)


def read_action_text(
    text: str, path: str, placement: tuple[int, ...] | None = None, name: str | None = None
) -> Schedule:
    """torch action text: one rank per line, actions separated by single spaces or tabs.

    This is what ``" ".join(map(str, pipeline_order[r]))`` prints; ``None`` and ``_`` are idle
    slots.  Lines that are blank or start with ``#`` are skipped.  torch's printed table
    (``_format_pipeline_order``: a ``Rank 0  Rank 1`` header, then one ``Step NN:`` per line)
    is refused by name.
    """
    for i, line in enumerate(text.splitlines(), 1):
        m = re.match(r"\s*(Rank 0\b|Step \d+:)", line)
        if m:
            raise error(
                "csv-bad-action",
                "this is torch's printed table (_format_pipeline_order: one step per line, "
                "ranks in columns); action text has one rank per line",
                Span(path, i, m.start(1) + 1, i, m.end(1) + 1, text),
                hints=[
                    'write each rank as " ".join(map(str, pipeline_order[r])), or the '
                    'CSV with schedule._dump_csv("sched.csv")'
                ],
            )
    rows = [
        []
        if line.lstrip().startswith("#")
        else ["" if c in ("None", "_") else c for c in re.split(r"[ \t]", line)]
        for line in text.splitlines()
    ]
    keep = [
        i
        for i, line in enumerate(text.splitlines())
        if line.strip() and not line.lstrip().startswith("#")
    ]
    programs = parse_rows(rows, path, text)
    programs += [[] for _ in range(len(rows) - len(programs))]
    at = [Span(path, i + 1, 1, i + 1, 2, text) for i in keep]
    return build_schedule([programs[i] for i in keep], path, placement, name, rows=at)


def torch_rows(
    schedule: Schedule, compute_only: bool = True, reduce_grad: bool = False
) -> list[list[str]]:
    """Each rank's actions as torch action text, groups flattened in program order (torch has
    no groups; see :func:`flatten_groups` for an order that stays deadlock-free).  An
    overlapped step (:class:`ppir.ir.Overlap`) is one cell in torch's own spelling,
    ``(0F7;7B3)OVERLAP_F_B``, which torch's ``_Action.from_str`` reads back as one action with
    ``sub_actions`` (and :func:`parse_cell` as the same Overlap): the round trip is exact.

    ``compute_only`` drops communication (torch's runtime inserts its own).  ``reduce_grad``
    writes the program's ``sREDUCE_GRAD`` (:class:`ppir.ir.Reduce`; by default right after the
    last backward, B or W, of each stage: :func:`ppir.ir.reduce.place_reduces`), which the
    ``compute_comms`` format needs for gradients to be divided by M (without it they are M
    times too large) and which the ``compute_only`` format must not contain.
    """
    from ppir.ir.reduce import place_reduces

    if reduce_grad:
        schedule = place_reduces(schedule)
    rows = []
    for prog in schedule.programs:
        cells = []
        for it in prog:
            if isinstance(it, Reduce):
                if reduce_grad:
                    cells.append(str(it))
                continue
            if isinstance(it, Overlap):  # torch's spelling, one cell: (0F7;7B3)OVERLAP_F_B
                cells.append(str(it))
                continue
            cells.extend(str(a) for a in item_actions(it) if not compute_only or a.kind.is_compute)
        rows.append(cells)
    return rows


def write_csv(schedule: Schedule, compute_only: bool = True, reduce_grad: bool = False) -> str:
    """The schedule as torch CSV text, one row per rank (see :func:`torch_rows`)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for cells in torch_rows(schedule, compute_only, reduce_grad):
        w.writerow(cells)
    return buf.getvalue()


def message_key(schedule: Schedule, rank: int, a: Action) -> tuple:
    """A key both ends of a message compute alike: (low rank, high rank, direction, sending
    stage, microbatch)."""
    peer = deps.peer_rank(schedule.placement, a)
    msg = deps.message_of(a)
    return (min(rank, peer), max(rank, peer), msg.grad, msg.src, msg.mb)


def flatten_groups(schedule: Schedule) -> Schedule:
    """Each group replaced by its actions, one at a time, in :func:`message_key` order.

    A group completes as a unit; its actions posted one by one complete only if every rank
    takes the messages it shares with its peers in one global order.  The lowering pairs each
    group with the peers' groups of the same exchange, so sorting every group by a key both
    ends agree on means the smallest pending message is always first on both of its ranks:
    the flattened program is deadlock-free under rendezvous semantics whenever the grouped one
    is, and the per-channel FIFO order stays the same on both ends.  Waits of deferred groups
    are dropped (the flattened actions are blocking).
    """
    programs = []
    for r, prog in enumerate(schedule.programs):
        out: list = []
        for it in prog:
            if isinstance(it, Group):
                out.extend(sorted(it.actions, key=lambda a, r=r: message_key(schedule, r, a)))
            elif not isinstance(it, Wait):
                out.append(it)
        programs.append(tuple(out))
    return schedule.replace_programs(tuple(programs))
