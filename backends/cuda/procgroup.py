"""Process-group set-up, device choice, pair warm-up and fail-fast error propagation.

Contract:

* :func:`init` reads torchrun's environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
  ``MASTER_ADDR``, ``MASTER_PORT``), picks CUDA + NCCL when GPUs are present (one GPU per local
  rank) and CPU + gloo otherwise (``device``/``backend`` override), and always passes a
  process-group ``timeout`` so that a stuck peer fails in bounded time.
* :class:`FailureChannel` shares the first failure through the rendezvous store: the failing
  rank records ``"rank R: message"`` before it exits, and every other rank's watchdog thread
  (or its own error handler) prints that message and exits non-zero.  A crashed gloo peer makes
  the others fail at once; the watchdog covers NCCL, where peers would otherwise wait for the
  timeout.
* :func:`warm_up` exchanges one element over every pipeline pair in one global order, so that
  lazy connection set-up never blocks the first real exchange.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

ERROR_KEY = "ppir/error"


@dataclass
class Context:
    rank: int
    world: int
    local_rank: int
    device: torch.device
    backend: str
    channel: FailureChannel | None = None


def pick_device(requested: str | None, local_rank: int) -> torch.device:
    if requested and requested != "auto":
        dev = torch.device(requested)
        if dev.type == "cuda" and dev.index is None:
            dev = torch.device("cuda", local_rank % max(torch.cuda.device_count(), 1))
        return dev
    if torch.cuda.is_available():
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def init(device: str | None = None, backend: str | None = None, timeout_s: float = 60.0) -> Context:
    """Initialise the default process group from the environment; returns the rank's context."""
    missing = [
        k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ
    ]
    if missing:
        raise RuntimeError(
            f"{', '.join(missing)} not set: start ranks with torchrun "
            "(torchrun --nproc-per-node P -m ppir.run ...) or 'ppir launch'"
        )
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    dev = pick_device(device, local_rank)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    backend = backend or ("nccl" if dev.type == "cuda" else "gloo")
    kwargs = {"device_id": dev} if backend == "nccl" else {}
    if rank != 0:
        _wait_for_store(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), timeout_s)
    dist.init_process_group(
        backend,
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=timeout_s),
        **kwargs,
    )
    # after init: without an agent store, rank 0 hosts the store only from here on
    channel = FailureChannel.connect(rank, timeout_s)
    return Context(rank, world, local_rank, dev, backend, channel)


def _wait_for_store(host: str, port: int, timeout_s: float) -> None:
    """Poll until the rendezvous store listens: torch's own client retries with a backoff of
    up to tens of seconds when it connects before rank 0 has started the store."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.05)


def warm_up(pairs: set[tuple[int, int]], rank: int, device) -> None:
    """One symmetric one-element exchange per pair, all ranks following the sorted pair order
    (a global order, so it cannot deadlock)."""
    for a, b in sorted(pairs):
        if rank not in (a, b):
            continue
        peer = b if rank == a else a
        out, into = torch.zeros(1, device=device), torch.empty(1, device=device)
        ops = [dist.P2POp(dist.isend, out, peer), dist.P2POp(dist.irecv, into, peer)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()


def plan_pairs(plan: dict) -> set[tuple[int, int]]:
    pairs = set()
    for r, prog in enumerate(plan["programs"]):
        for ins in prog:
            for o in ins.get("ops", ()):
                pairs.add((min(r, o["peer"]), max(r, o["peer"])))
    return pairs


class FailureChannel:
    """First-failure record in the rendezvous store, plus a watchdog thread (see module doc)."""

    def __init__(self, store, rank: int, key: str):
        self.store, self.rank, self.key = store, rank, key
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def connect(cls, rank: int, timeout_s: float) -> FailureChannel | None:
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
        return cls(store, rank, f"{ERROR_KEY}/{restart}")

    def report(self, text: str) -> str:
        """Record ``text`` unless another rank failed first; returns the first failure."""
        try:
            return self.store.compare_set(self.key, "", text).decode()
        except Exception:  # noqa: BLE001 - the store may be gone with the failing rank
            return text

    def first_failure(self) -> str | None:
        try:
            if self.store.check([self.key]):
                return self.store.get(self.key).decode()
        except Exception:  # noqa: BLE001
            return None
        return None

    def start_watchdog(self, interval_s: float = 0.25) -> None:
        def watch():
            while not self._stop.wait(interval_s):
                try:
                    if not self.store.check([self.key]):
                        continue
                    first = self.store.get(self.key).decode()
                except Exception:  # noqa: BLE001 - store gone (e.g. normal shutdown): stop
                    return
                if self._stop.is_set():
                    return
                print(
                    f"ppir.run: error: rank {self.rank} stopping: {first}",
                    file=sys.stderr,
                    flush=True,
                )
                os._exit(1)

        self._thread = threading.Thread(target=watch, name="ppir-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()


def fail(ctx: Context | None, rank: int | None, message: str) -> None:
    """Report a failure of this rank (or the first failure elsewhere) and exit 1 at once.

    Besides stderr, the report goes to ``$PPIR_ERROR_DIR/rank<R>.json`` when the launcher set
    that variable (``time``, ``rank``, ``message``, ``first``, ``secondary``)."""
    own = f"rank {rank}"
    text = (
        message
        if rank is None or message.startswith((own + ":", own + ","))
        else f"{own}: {message}"
    )
    first = text
    if ctx is not None and ctx.channel is not None:
        ctx.channel.stop()
        first = ctx.channel.report(text)
    shown = text if first == text else f"{own} stopping: {first}\n  ({own}'s own error: {message})"
    print(f"ppir.run: error: {shown}", file=sys.stderr, flush=True)
    _write_report(rank, text, first)
    sys.stdout.flush()
    if rank == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        time.sleep(1.0)  # the store lives in this process: let the others read the record
    os._exit(1)


def _write_report(rank: int | None, text: str, first: str) -> None:
    folder = os.environ.get("PPIR_ERROR_DIR")
    if not folder:
        return
    try:
        rec = {
            "time": time.time(),
            "rank": rank,
            "message": text,
            "first": first,
            "secondary": first != text,
        }
        with open(os.path.join(folder, f"rank{rank}.json"), "w") as f:
            json.dump(rec, f)
    except OSError:
        pass
