"""What the commands print besides their results' words: aligned tables, the line that names
the schedule above a report, and progress bars.

Contract
--------
* :func:`table` lays rows of cells out in columns, as plain text for stdout: no colour, no box
  characters, no wrapping, no trailing spaces, so that it pipes, greps, diffs and golden-tests
  the same on a terminal and in a file.  Widths are ``len()`` of each cell's ``str()``.
* :func:`schedule_line` heads ``ppir analyze``'s and ``ppir compile --backend cost``'s reports
  with the schedule, its parameters and its shape, in the same words.
* :func:`progress` is a context manager around a progress bar (tqdm) on stderr.  It shows only
  when its stream is a terminal and ``quiet`` is false; otherwise it writes nothing at all and
  tqdm is not even imported, so piped or logged runs see only the command's results.  The bar
  is cleared when the block ends (normally, on an error or on Ctrl-C).  Print results after the
  block, not inside it: stdout and stderr share the terminal.  With ``delay`` nothing at all is
  written for work that ends sooner; ``clock=True`` shows the elapsed time and the status only
  (work without a count, such as one compile), ticking every second.
* :func:`add_quiet_argument` adds the ``--quiet``/``-q`` flag that :func:`progress` obeys.

Usage::

    with progress(len(jobs), "tune", quiet=args.quiet, unit="choices") as bar:
        for job in jobs:
            run(job)
            bar.update(status=job.name)
    print(table([["schedule", "step time"], *rows], align="<>"))
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO

from ppir.diagnostics import count


def table(rows: Sequence[Sequence[object]], align: str = "<", gap: str = "  ") -> str:
    """The rows as aligned text lines joined by newlines (no final newline).

    ``align`` gives each column's alignment, ``<`` (left) or ``>`` (right), one character per
    column; its last character repeats for the remaining columns (``"<>"``: the first column
    left, the others right).  A header is simply the first row.  A row with fewer cells than
    the widest row spans: its last cell runs on unpadded over the remaining columns and does
    not widen them (e.g. ``["8", "error: ..."]`` in a table of numbers).
    """
    if not align or set(align) - {"<", ">"}:
        raise ValueError(f"align must be a string of '<' and '>', got {align!r}")
    cells = [[str(c) for c in row] for row in rows]
    ncols = max((len(r) for r in cells), default=0)
    widths = [0] * ncols
    for r in cells:
        sized = r if len(r) == ncols else r[:-1]  # a spanning last cell takes no column width
        for i, c in enumerate(sized):
            widths[i] = max(widths[i], len(c))
    lines = []
    for r in cells:
        out = []
        for i, c in enumerate(r):
            if len(r) < ncols and i == len(r) - 1:
                out.append(c)
            elif align[min(i, len(align) - 1)] == ">":
                out.append(c.rjust(widths[i]))
            else:
                out.append(c.ljust(widths[i]))
        lines.append(gap.join(out).rstrip())
    return "\n".join(lines)


class Progress:
    """The handle :func:`progress` yields; every method does nothing when the bar is hidden."""

    def __init__(self, bar=None, delay: float = 0.0):
        self._bar = bar
        self._visible_at = time.monotonic() + delay  # tqdm's own delay covers counted steps

    def _due(self) -> bool:
        return time.monotonic() >= self._visible_at

    @property
    def shown(self) -> bool:
        """Whether a bar is on the terminal."""
        return self._bar is not None

    def update(self, n: int = 1, status: str | None = None) -> None:
        """Advance by ``n`` (0: only change the status); ``status`` is a short text shown after
        the counts, e.g. the parameters just checked."""
        if self._bar is None:
            return
        if status is not None:
            self._bar.set_postfix_str(status, refresh=False)
        self._bar.update(n)
        if n == 0 and self._due():  # a bare refresh would ignore the delay
            self._bar.refresh()

    def rename(self, desc: str) -> None:
        """A new description, the count and the clock going on (a compile that learns its
        schedule's full name once it has loaded it)."""
        if self._bar is not None:
            self._bar.set_description_str(desc, refresh=False)

    def restart(self, desc: str, total: int | None = None) -> None:
        """Begin a new phase: a new description, the count back to 0, a new total (None: an
        open-ended count without a bar)."""
        if self._bar is None:
            return
        self._bar.set_description_str(desc, refresh=False)
        self._bar.set_postfix_str("", refresh=False)
        self._bar.total = total  # reset(total=None) would keep the old total
        self._bar.reset(total=total)


def schedule_line(name, params, ranks, stages, microbatches, pipelines=1) -> str:
    """``1f1b(P=4, M=8): 4 ranks, 4 stages, 8 microbatches``.  ``microbatches`` is one
    pipeline's (the schedule's ``microbatches`` declaration); a schedule of several pipelines
    says so and counts them all, as DualPipe's ``-D M`` does: ``dualpipe(P=4, M=16): 4 ranks, 8
    stages in 2 pipelines, 16 microbatches (8 per pipeline)``."""
    args = ", ".join(f"{k}={v}" for k, v in dict(params).items())
    shape = f"{name}({args}): {count(ranks, 'rank')}, {count(stages, 'stage')}"
    if pipelines == 1:
        return f"{shape}, {count(microbatches, 'microbatch')}"
    return (
        f"{shape} in {pipelines} pipelines, {count(microbatches * pipelines, 'microbatch')} "
        f"({microbatches} per pipeline)"
    )


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


@contextmanager
def progress(
    total: int | None,
    desc: str,
    *,
    quiet: bool = False,
    unit: str = "it",
    delay: float = 0.0,
    clock: bool = False,
    file: IO[str] | None = None,
) -> Iterator[Progress]:
    """A progress bar on ``file`` (default: ``sys.stderr`` when the block starts) counting up to
    ``total`` (None: a count without a bar) in ``unit``s, labelled ``desc``.  With ``delay`` the
    bar appears only once the work has taken that many seconds (e.g. 2 for a compile that is
    usually instant).  ``clock``: no count, only ``desc: 00:03, STATUS``, redrawn every second
    (the status is what :meth:`Progress.update` last said).  Hidden (a no-op
    :class:`Progress`) when ``quiet`` or when the stream is not a terminal."""
    stream = sys.stderr if file is None else file
    if quiet or not _is_terminal(stream):
        yield Progress()
        return
    from tqdm import tqdm

    bar = tqdm(
        total=total,
        desc=desc,
        unit=" " + unit,  # tqdm writes the unit right after the number: "3/8 [..., 2.1 it/s]"
        file=stream,
        leave=False,
        delay=delay,
        dynamic_ncols=True,
        bar_format="{desc}: {elapsed}{postfix}" if clock else None,
    )
    handle = Progress(bar, delay)
    stop = threading.Event()
    ticker = None
    if clock:

        def tick() -> None:
            while not stop.wait(1.0):
                if handle._due():
                    bar.refresh()
                    # tqdm clears at close only a bar it saw printed after its delay, which a
                    # bare refresh does not record: a line drawn here would stay on the screen
                    bar.last_print_t = bar._time()

        ticker = threading.Thread(target=tick, name="ppir-progress", daemon=True)
        ticker.start()
    try:
        yield handle
    finally:
        stop.set()
        if ticker is not None:
            ticker.join()
        bar.close()


def add_quiet_argument(parser) -> None:
    """``--quiet``/``-q``: no progress on stderr (results and diagnostics are still printed)."""
    parser.add_argument(
        "--quiet", "-q", action="store_true", help="no progress bar on stderr (results unchanged)"
    )
