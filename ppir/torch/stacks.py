"""Where a rank was when it stopped: its main thread's stack, as the failure record keeps it
(``where``, :mod:`ppir.torch.failures`) and as a ``faulthandler`` dump writes it on SIGTERM,
both most recent call last and without ``python -m``'s runpy frames (the launcher shows them,
``backends/cuda/outcome.py``)."""

from __future__ import annotations

import re
import sys
import threading


def main_thread_stack() -> str | None:
    """Where the main thread is (most recent call last, runpy's frames left out): the
    watchdog stops a rank whose peer gave up on it, and a rank stuck in the user's code (a
    sleep, a lock) is named by its peer's timeout but said nothing of where it was."""
    import traceback

    frame = sys._current_frames().get(threading.main_thread().ident)
    if frame is None:
        return None
    frames = [f for f in traceback.format_stack(frame) if not runpy_frame(f)]
    return "".join(frames).rstrip("\n") or None


def dump_frames(dump: str | None) -> list[str]:
    """The main thread's ``  File "...", line N in f`` lines of a faulthandler dump (the
    thread whose stack starts in runpy, else the last one), most recent call last, runpy's
    frames left out."""
    blocks = [b for b in (dump or "").split("\n\n") if "(most recent call first):" in b]
    if not blocks:
        return []
    main = next((b for b in blocks if "_run_module_as_main" in b), blocks[-1])
    lines = [ln for ln in main.splitlines()[1:] if ln.startswith("  File ")]
    return [ln for ln in reversed(lines) if not runpy_frame(ln)]


def runpy_frame(line: str) -> bool:
    """Whether a traceback or faulthandler line is a frame of ``python -m``'s runpy (frozen
    from Python 3.11, ``.../runpy.py`` before)."""
    return "<frozen runpy>" in line or bool(re.search(r'[\\/]runpy\.py"', line))
