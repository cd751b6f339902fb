"""How a rank of ``ppir.run`` fails: one report, the right rank named, every rank ending.

Contract:

* :class:`FailureChannel` holds the first failure in the rendezvous store (torchrun's agent
  store, or rank 0's): a failing rank records ``"rank R: message"`` with a compare-and-set, and
  every other rank's watchdog thread (polling every 0.25 s) prints ``rank K stopping: <first>``
  and exits 1.  The watchdog also ends the rank when its parent (the launcher) is gone, or
  when the store itself is (its host, node 0's launcher, went away: a rank on another node
  stuck in the user's code would otherwise wait for ever), recording where it was.
* :meth:`FailureChannel.stop` ends the watchdog and waits for it (bounded by the store's
  timeout): it returns only once the thread is out of the store, because a daemon thread
  still inside a store call when the interpreter exits is unwound through C++ and aborts the
  process ("terminate called without an active exception", SIGABRT) after a successful run.
* :func:`die_with_parent` asks Linux to SIGKILL this process when its parent dies
  (``PR_SET_PDEATHSIG``), so a SIGKILLed launcher leaves no rank behind.
* :func:`fail` reports an exception and exits 1 at once.  A :class:`CommError` (a peer timed
  out or went away) is usually the consequence of another rank's failure: the rank waits up to
  ``settle_s`` for that failure to appear in the store and then reports itself as stopping
  because of it; only if none appears is the communication failure the first one.
* :func:`stop_on_interrupt`: SIGINT (Ctrl-C, which torchrun forwards to every rank; ``ppir
  launch`` sends SIGTERM instead) ends the rank at once with exit status 130, without a
  traceback from wherever it was (importing torch, waiting on a peer).
* Reports: stderr (one line for the runtime's own errors; the full traceback for an exception
  in the user's code when no launcher collects it; nothing under ``ppir launch``, which sets
  :data:`LAUNCHER_ENV` and prints the root cause once from the error files, unless the rank
  cannot write its file), and the torchelastic error file
  (``$TORCHELASTIC_ERROR_FILE``, torch's format) with a ``ppir`` record that the launcher reads:
  ``rank``, ``time``, ``kind`` (``own``, ``comm`` or ``secondary``), ``message``, ``first``,
  ``peers``, ``timeout``, ``traceback``, ``usage`` (true for a model that breaks the runtime's
  contract, :class:`~ppir.torch.errors.ModelError` or
  :class:`~ppir.torch.errors.ShapeMismatch`: the user's mistake, which ``ppir launch`` ends
  with exit code 2, as ``ppir profile`` does), ``where`` (a rank its watchdog stopped: its
  main thread's stack then, which the launcher shows when a peer's timeout names the rank;
  a rank the launcher stops with SIGTERM leaves the same in a file, :func:`stack_on_stop`).
  The file is replaced atomically, so the launcher never reads half of it, however the rank
  is stopped.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import json
import math
import os
import signal
import sys
import threading
import time

from ppir.torch.stacks import main_thread_stack

ERROR_KEY = "ppir/error"
LAUNCHER_ENV = "PPIR_LAUNCHER"
"""Set to 1 by ``ppir launch`` for its ranks: the launcher reports failures and interruptions,
the ranks stay silent (their error files carry the records)."""


def launched() -> bool:
    """Whether ``ppir launch`` started this rank and reads its error file."""
    return os.environ.get(LAUNCHER_ENV) == "1" and bool(os.environ.get("TORCHELASTIC_ERROR_FILE"))


def stop_on_interrupt() -> None:
    """End the rank on SIGINT at once (exit status 130): under ``ppir launch`` silently (the
    launcher says it stopped every rank), else with one line naming the rank."""

    def handler(signum, frame):
        if not launched():
            rank = os.environ.get("RANK", "0")
            print(f"ppir.run: rank {rank}: interrupted", file=sys.stderr, flush=True)
        os._exit(128 + signum)

    signal.signal(signal.SIGINT, handler)


STACK_SUFFIX = ".stack"
_STACK_FILES: list = []  # open for the life of the process: faulthandler writes to them


def stack_on_stop() -> None:
    """Under ``ppir launch``: on SIGTERM (the launcher stopping this rank, often before its
    watchdog saw the failure) write every thread's Python stack to the error file's path plus
    :data:`STACK_SUFFIX`, then die by the signal as before (``faulthandler``, chained: it
    works while the rank waits inside C++); the launcher reads it as it reads ``where``."""
    import faulthandler

    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not (launched() and path):
        return
    try:
        f = open(path + STACK_SUFFIX, "w")  # noqa: SIM115 - kept open (above)
    except OSError:
        return
    _STACK_FILES.append(f)
    faulthandler.register(signal.SIGTERM, file=f, all_threads=True, chain=True)


def die_with_parent(parent: int | None = None) -> None:
    """SIGKILL this process when its parent dies (Linux); exit now if it is already gone
    (``parent``: the pid it must still have; else a parent of pid 1 counts as gone)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent if parent is not None else os.getppid() == 1:
        os._exit(1)


class FailureChannel:
    """First-failure record in the rendezvous store, plus a watchdog thread (module doc)."""

    def __init__(self, store, rank: int, key: str, timeout_s: float = 60.0):
        self.store, self.rank, self.key = store, rank, key
        self.timeout_s = timeout_s
        self.parent = os.getppid()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost = False  # a store call failed: not asked again unless it is reconnected
        self.address: tuple[str, int] | None = None  # the store's (host, port), to reconnect

    @classmethod
    def connect(cls, rank: int, timeout_s: float) -> FailureChannel | None:
        import torch.distributed as dist

        try:
            store = dist.TCPStore(
                os.environ["MASTER_ADDR"],
                int(os.environ["MASTER_PORT"]),
                is_master=False,
                timeout=datetime.timedelta(seconds=timeout_s),
            )
        except Exception:  # noqa: BLE001 - no store: fall back on the process-group timeout
            return None
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        run = os.environ.get("TORCHELASTIC_RUN_ID", "")
        channel = cls(store, rank, f"{ERROR_KEY}/{run}/{restart}", timeout_s)
        channel.address = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
        return channel

    def gone(self, tries: int = 3, gap_s: float = 0.5) -> bool:
        """After a failed store call: whether the store's host is gone (node 0's launcher
        ended), or the failure was passing (a reset, a busy store), in which case the store is
        asked again through a new client.  The host is gone when it refuses a plain TCP
        connection ``tries`` times ``gap_s`` apart (sockets log nothing, where each failed
        call of torch's client logs a C++ stack); a channel without an address (no store of
        its own) counts it gone."""
        if self.address is None:
            return True
        import socket

        for _ in range(tries):
            try:
                socket.create_connection(self.address, timeout=1.0).close()
            except OSError:
                if self._stop.wait(gap_s):
                    return False  # the rank is ending anyway
                continue
            try:
                import torch.distributed as dist

                wait = datetime.timedelta(seconds=self.timeout_s)
                self.store = dist.TCPStore(*self.address, is_master=False, timeout=wait)
            except Exception:  # noqa: BLE001 - it listens but does not answer: try again
                continue
            self.lost = False
            return False
        return True

    def report(self, text: str) -> str:
        """Record ``text`` unless another rank failed first; returns the first failure."""
        if self.lost:
            return text
        try:
            return self.store.compare_set(self.key, "", text).decode()
        except Exception:  # noqa: BLE001 - the store may be gone with the launcher
            self.lost = True
            return text

    def first_failure(self) -> str | None:
        """The recorded first failure, if any.  Once a store call has failed the store is not
        asked again: each failed call logged a C++ stack (torch's store client), and the
        watchdog's polls and :func:`fail`'s wait printed dozens of them when the node that
        hosts the store went away."""
        if self.lost:
            return None
        try:
            if self.store.check([self.key]):
                return self.store.get(self.key).decode()
        except Exception:  # noqa: BLE001
            self.lost = True
            return None
        return None

    def start_watchdog(self, interval_s: float = 0.25, settle_s: float = 1.5) -> None:
        """Poll the store (module docstring).  A store that went away ends the rank, unless
        its main thread fails meanwhile (``settle_s``; its own error names the peer)."""

        def watch():
            while not self._stop.wait(interval_s):
                if os.getppid() != self.parent:
                    _exit_quietly(f"rank {self.rank}: the launcher is gone; stopping")
                first = self.first_failure()
                if self.lost and self.gone() and not self._stop.wait(settle_s):
                    _store_lost(self.rank, self.address)  # the main thread did not fail
                if first is None or self._stop.is_set():
                    continue
                _report_secondary(self.rank, first, None, where=main_thread_stack())
                os._exit(1)

        self._thread = threading.Thread(target=watch, name="ppir-watchdog", daemon=True)
        self._thread.start()

    def stop(self, wait: bool = True) -> bool:
        """End the watchdog and (``wait``) wait until it is out of the store (module
        docstring); False if it is still inside a store call after the store's timeout.  A
        rank that leaves with ``os._exit`` need not wait: that exit does not unwind threads."""
        self._stop.set()
        thread = self._thread
        if not wait or thread is None or thread is threading.current_thread():
            return True
        thread.join(self.timeout_s + 1.0)
        return not thread.is_alive()


def _store_lost(rank: int, address: tuple[str, int] | None) -> None:
    """The rendezvous store went away while this rank runs: the node that hosts it (node 0's
    launcher; rank 0 under torchrun without the agent's store) is gone, and the run with it.
    A rank stuck in the user's code (a sleep) on another node waited for ever: nothing else
    would end it, since its own launcher stops it only when one of its own ranks ends."""
    where = "{}:{}".format(*address) if address else "?"
    text = (
        f"rank {rank}: lost the rendezvous store at {where} (did node 0's launcher stop?); stopping"
    )
    written = _write_error_file(rank, "lost", text, text, None, where=main_thread_stack())
    if not (written and launched()):
        print(f"ppir.run: error: {text}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(1)


def _exit_quietly(message: str) -> None:
    print(f"ppir.run: error: {message}", file=sys.stderr, flush=True)
    os._exit(1)


def ppir_own(exc: BaseException) -> bool:
    """Whether ``exc`` is ppir's own error (one line, no traceback): the runtime's, a plan's,
    or a ppir diagnostic (``--dump-plan`` unwritable); else it came from the user's code."""
    from ppir.diagnostics import PpirError
    from ppir.plan import PlanError
    from ppir.torch.errors import RuntimeFailure

    return isinstance(exc, (RuntimeFailure, PlanError, PpirError))


def describe(exc: BaseException, rank: int | None) -> str:
    from ppir.diagnostics import PpirError
    from ppir.torch.errors import RuntimeFailure

    own = f"rank {rank}"
    if isinstance(exc, PpirError):  # its message alone, without "ppir: error: "
        text = exc.message
    else:
        text = str(exc) if isinstance(exc, RuntimeFailure) else _exception_line(exc)
    if rank is None or text.startswith((own + ":", own + ",")):
        return text
    return f"{own}: {text}"


def _exception_line(exc: BaseException) -> str:
    """``Type: message`` as Python's traceback ends, or ``Type`` alone for an exception
    without a message (``raise RuntimeError()`` read ``rank 1: RuntimeError: ``)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def fail(ctx, rank: int | None, exc: BaseException, settle_s: float = 1.5) -> None:
    """Report ``exc`` (see the module docstring) and exit 1 at once."""
    from ppir.torch.errors import MODEL_MISTAKES, CommError
    from ppir.tracebacks import user_traceback

    channel = getattr(ctx, "channel", None)
    if channel is not None:
        channel.stop(wait=False)  # this rank leaves with os._exit (no unwinding)
    text = describe(exc, rank)
    user_code = not ppir_own(exc)
    tb = user_traceback(exc) if user_code else None
    if isinstance(exc, CommError) and channel is not None:
        end = time.monotonic() + settle_s
        while time.monotonic() < end and not channel.lost:
            first = channel.first_failure()
            if first is not None:
                _report_secondary(rank, first, text)
                os._exit(1)
            time.sleep(0.05)
    first = channel.report(text) if channel is not None else text
    if first != text:
        _report_secondary(rank, first, text)
        os._exit(1)
    kind = "comm" if isinstance(exc, CommError) else "own"
    written = _write_error_file(
        rank,
        kind,
        text,
        first,
        tb,
        peers=list(getattr(exc, "peers", ())),
        timeout=bool(getattr(exc, "timeout", False)),
        usage=isinstance(exc, MODEL_MISTAKES),
    )
    if not (written and launched()):
        print(f"ppir.run: error: {text}", file=sys.stderr, flush=True)
        if tb and not written:
            print(tb, file=sys.stderr, end="", flush=True)
    sys.stdout.flush()
    if rank == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        time.sleep(1.0)  # the store lives in this process: let the others read the record
    os._exit(1)


def record(rank: int, message: str) -> bool:
    """Record a failure that ends the rank without an exception (a failed verification) for
    the launcher; the rank then exits non-zero itself.  Whether the record was written."""
    return _write_error_file(rank, "own", message, message, None)


def _report_secondary(rank, first: str, own: str | None, where: str | None = None) -> None:
    msg = f"rank {rank} stopping: {first}"
    if own:
        msg += f"\n  (rank {rank}'s own error: {own})"
    written = _write_error_file(rank, "secondary", own or msg, first, None, where=where)
    if not (written and launched()):
        print(f"ppir.run: error: {msg}", file=sys.stderr, flush=True)
    sys.stdout.flush()


def _write_error_file(
    rank, kind, message, first, tb, peers=(), timeout=False, usage=False, where=None
) -> bool:
    """torchelastic's error-file format, plus the ``ppir`` record (module docstring); whether
    the file was written."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return False
    now = time.time()
    # torchrun names the record with the smallest whole-second timestamp its root cause (the
    # lowest rank on a tie): a rank stopping because of another's failure rounds up, so that
    # the failure it quotes, written within the same second, stays the root cause
    stamp = math.ceil(now) if kind == "secondary" else int(now)
    rec = {
        "message": {
            "message": message,
            "extraInfo": {"py_callstack": tb or message, "timestamp": str(stamp)},
        },
        "ppir": {
            "rank": rank,
            "time": now,
            "kind": kind,
            "message": message,
            "first": first,
            "peers": list(peers),
            "timeout": timeout,
            "traceback": tb,
            "usage": usage,
            "where": where,
        },
    }
    # Written whole or not at all: the launcher parses this file when the rank ends, and a
    # rank stopped halfway through a plain write would leave an empty or partial file that
    # torch's agent cannot parse (it raises instead of reporting the failure).
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(rec, f)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        return False
    return True
