"""The traceback of an exception raised in the user's own code (a model module, its forward,
its loss), as ppir's launcher, profile and runtime print it.

Contract: :func:`user_traceback` formats ``exc`` as :func:`traceback.format_exception` does,
every chained exception and note included, except that the frames of ppir and of Python's
import machinery *above* the user's first frame are cut to ppir's last (the one that called
into the user's code, through importlib for a model file): they say how ppir reached the
model, not what went wrong in it.  Every frame from there down is kept, ppir's and torch's
among them.  A SyntaxError in a file outside ppir keeps no frame (its file, line and caret
say where).  An exception with no frame of the user's (a bug in ppir) keeps its whole
traceback.
"""

from __future__ import annotations

import os
import traceback

_PPIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _internal(filename: str) -> bool:
    """ppir's own files, and Python's import and ``-m`` machinery."""
    return filename.startswith(_PPIR) or filename.startswith("<frozen ")


def user_traceback(exc: BaseException) -> str:
    """``exc``'s traceback with the frames above the user's code cut (the module docstring)."""
    te = traceback.TracebackException.from_exception(exc)
    frames = list(te.stack)
    if isinstance(exc, SyntaxError) and exc.filename and not _internal(exc.filename):
        keep = []
    else:
        first = next((i for i, f in enumerate(frames) if not _internal(f.filename)), None)
        if first is None:
            keep = frames
        else:  # ppir's last frame above it, then the user's code down
            ours = [f for f in frames[:first] if f.filename.startswith(_PPIR)]
            keep = ours[-1:] + frames[first:]
    te.stack = traceback.StackSummary.from_list(keep)
    return "".join(te.format())
