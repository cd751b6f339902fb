"""How a rank process ends once its distributed work is done: without finalising the
interpreter, and without losing what the user's code left to the interpreter's end.

Why: torch's gloo backend runs every collective on worker threads, and a worker drops its
reference to a finished collective (a barrier holds the collectives before it, with their
tensors) after the caller has seen it complete.  Dropping a tensor that Python also knew needs
the GIL.  ``torch.distributed.destroy_process_group`` joins those threads only when nothing
else holds the process group, and importing ``torch._dynamo`` (transformers does, and torch
does on first use of some operators) keeps references to the default group.  A worker that
asks for the GIL while the interpreter is finalising is unwound through C++ and the process
aborts after a successful run ("terminate called without an active exception", SIGABRT): 2
runs in 30 of HF GPT-2 with ``zbv`` on 2 ranks, under load.  The same crash without
``destroy_process_group`` is pytorch/pytorch#190489; a fix in torch (an atexit handler that
destroys the groups, pytorch/pytorch#179291) was abandoned, and would not reach a group that
something else still holds.

Contract of :func:`leave`: do what a normal exit does before finalising -- wait for the
process's non-daemon threads, run the ``atexit`` handlers (the user's and torch's) -- then close
every file object left open (outermost first: text, then buffered and compressed, then raw; a
gzip file gets its trailer) and flush the standard streams, and end the process at once with
``os._exit(status)``, so that no thread is unwound.  Only at the end of a process's own main
(a rank of ``ppir.run``, a ``ppir profile`` rank, a training script that embeds
:class:`ppir.torch.PipelineRuntime`, after its last barrier), never from a library call.
"""

from __future__ import annotations

import atexit
import gc
import io
import os
import sys
import threading
from typing import NoReturn


def leave(status: int) -> NoReturn:
    """End this process with ``status`` once its threads, ``atexit`` handlers and open files
    are done with (module docstring)."""
    try:
        threading._shutdown()  # what a normal exit waits for first: the non-daemon threads
        atexit._run_exitfuncs()  # then the handlers (an error in one is printed, as usual)
    finally:
        close_open_files()
        os._exit(status)


STANDARD = ("stdin", "stdout", "stderr", "__stdin__", "__stdout__", "__stderr__")


def close_open_files() -> None:
    """Close every open file object but the standard streams, which are flushed, as the
    interpreter would have while finalising (a file the user's code opened and never closed);
    a wrapper before what it wraps, so that each writes its last bytes through."""
    standard = set()
    for name in STANDARD:
        stream = getattr(sys, name, None)
        _flush(stream)
        while stream is not None and id(stream) not in standard:  # the stream and its layers
            standard.add(id(stream))
            stream = getattr(stream, "buffer", None) or getattr(stream, "raw", None)
    # type(), not isinstance: isinstance reads obj.__class__, which some objects compute
    # (torch's deprecated reduce_op warns on it)
    files = [o for o in gc.get_objects() if issubclass(type(o), io.IOBase)]
    for layer in (io.TextIOBase, io.BufferedIOBase, io.IOBase):
        for f in files:
            if issubclass(type(f), layer) and id(f) not in standard:
                _close(f)


def _flush(f) -> None:
    try:
        if f is not None and not f.closed and f.writable():
            f.flush()
    except Exception:  # noqa: BLE001 - a broken pipe or a detached stream: nothing to keep
        pass


def _close(f) -> None:
    try:
        if not f.closed:
            f.close()
    except Exception:  # noqa: BLE001 - as finalisation, which ignores a failing close
        pass
