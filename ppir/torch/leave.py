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

Contract of :func:`leave`: run the ``atexit`` handlers (the user's and torch's), flush every
open writable file object and the standard streams, then end the process at once with
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
from typing import NoReturn


def leave(status: int) -> NoReturn:
    """End this process with ``status`` after its ``atexit`` handlers, its buffered writes
    flushed (module docstring)."""
    try:
        atexit._run_exitfuncs()  # what a normal exit runs first (a handler's error is printed)
    finally:
        flush_open_files()
        os._exit(status)


def flush_open_files() -> None:
    """Flush the standard streams and every open writable file object that the interpreter
    would have flushed while finalising (a file the user's code opened and never closed)."""
    for stream in (sys.stdout, sys.stderr):
        _flush(stream)
    for obj in gc.get_objects():
        # type(), not isinstance: isinstance reads obj.__class__, which some objects compute
        # (torch's deprecated reduce_op warns on it)
        if issubclass(type(obj), io.IOBase):
            _flush(obj)


def _flush(f) -> None:
    try:
        if f is not None and not f.closed and f.writable():
            f.flush()
    except Exception:  # noqa: BLE001 - a broken pipe or a detached stream: nothing to keep
        pass
