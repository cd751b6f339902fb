"""Process groups for pipeline x data parallel: the default group from torchrun's environment,
the 2-D device mesh, the device, and the pair warm-up.

Contract:

* :func:`init` reads torchrun's environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
  ``MASTER_ADDR``, ``MASTER_PORT``), picks CUDA + NCCL when GPUs are present (one GPU per local
  rank) and CPU + gloo otherwise (``device``/``backend`` override), and always passes a
  process-group ``timeout`` (which must be positive) so that a stuck peer fails in bounded time;
  a peer that does not join within it is a :class:`CommError` naming this rank (not torch's
  store error and traceback).
* :func:`make_mesh` lays out ``pp x dp`` ranks as a ``torch.distributed.device_mesh`` with
  dimensions ``("pp", "dp")``: global rank = ``pp_rank * dp + dp_rank``, so the replicas of one
  stage are neighbours (on one node when ``dp`` divides the processes per node) and the
  pipeline spans nodes, as Megatron-LM's default order does.  With ``dp == 1`` the pipeline
  group is the default group and no mesh is built.
* :func:`warm_up` exchanges one element over every pipeline pair in one global order, so that
  lazy connection set-up never blocks the first real exchange.
* :func:`wait_all` waits for posted work within ``timeout_s`` seconds (torch's
  ``Work.wait(timeout=...)``), or within the process group's timeout when it is None: every
  wait of the runtime goes through it, so ``PipelineRuntime(timeout_s=...)`` bounds them.
"""

from __future__ import annotations

import datetime
import os
import socket
import sys
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ppir.torch.errors import SetupError, comm_error, not_launched


@dataclass
class Context:
    rank: int
    world: int
    local_rank: int
    device: torch.device
    backend: str
    timeout_s: float
    channel: object = None  # ppir.torch.failures.FailureChannel


@dataclass
class Mesh:
    """This rank's place in the ``pp x dp`` layout and its two groups (``None`` = default)."""

    pp_size: int
    dp_size: int
    pp_rank: int
    dp_rank: int
    pp_group: object = None
    dp_group: object = None
    device_mesh: object = None

    def pp_global(self, pp_rank: int) -> int:
        return pp_rank * self.dp_size + self.dp_rank

    def dp_global(self, dp_rank: int) -> int:
        return self.pp_rank * self.dp_size + dp_rank


def pick_device(
    requested: str | None, local_rank: int, backend: str | None = None, api: bool = False
) -> torch.device:
    """The device of local rank ``local_rank``: ``requested`` ("auto" or None: cuda when GPUs
    are present, else cpu).  SetupError for a device this machine lacks, or for ``backend``
    nccl without CUDA (one line, before any process group exists), in the words of the
    command line's flags, or (``api``) of :func:`init`'s arguments."""
    said = f"device={requested!r}" if api else f"--device {requested}"
    if requested and requested != "auto":
        try:
            dev = torch.device(requested)
        except RuntimeError:
            dev = None
        if dev is None or dev.type not in ("cpu", "cuda"):
            raise SetupError(f"{said}: expected auto, cpu, cuda or cuda:N")
        if dev.type == "cuda" and not torch.cuda.is_available():
            leave = "pass device=None or 'cpu'" if api else "leave --device out"
            raise SetupError(
                f"{said}: this machine has no CUDA device "
                f"(torch.cuda.is_available() is False); {leave} to run on the CPU"
            )
        if dev.type == "cuda" and dev.index is None:
            dev = torch.device("cuda", local_rank % max(torch.cuda.device_count(), 1))
    elif torch.cuda.is_available():
        dev = torch.device("cuda", local_rank % torch.cuda.device_count())
    else:
        dev = torch.device("cpu")
    if backend == "nccl" and dev.type != "cuda":
        raise SetupError(
            f"{'backend=' + repr(backend) if api else '--dist-backend nccl'} needs CUDA "
            f"devices, and the ranks run on {dev.type}: use gloo (the default on the CPU)"
        )
    return dev


def check_timeout(timeout_s) -> float:
    if not isinstance(timeout_s, (int, float)) or not timeout_s > 0 or timeout_s != timeout_s:
        raise SetupError(f"the timeout must be a positive number of seconds, got {timeout_s!r}")
    return float(timeout_s)


def init(device: str | None = None, backend: str | None = None, timeout_s: float = 60.0) -> Context:
    """Initialise the default process group from the environment; returns the rank's context."""
    timeout_s = check_timeout(timeout_s)
    script = sys.argv[0] if sys.argv and sys.argv[0].endswith(".py") else "SCRIPT.py"
    problem = not_launched(script)  # (ppir.run checks before it calls this)
    if problem is not None:
        raise problem
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    dev = pick_device(device, local_rank, backend, api=True)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    backend = backend or ("nccl" if dev.type == "cuda" else "gloo")
    kwargs = {"device_id": dev} if backend == "nccl" else {}
    if rank != 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        _wait_for_store(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), timeout_s)
    try:
        dist.init_process_group(
            backend,
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=timeout_s),
            **kwargs,
        )
    except RuntimeError as e:  # torch's DistStoreError/DistNetworkError: a peer did not join
        raise comm_error(f"rank {rank}: joining the process group", (), e, timeout_s) from None
    return Context(rank, world, local_rank, dev, backend, timeout_s)


def _wait_for_store(host: str, port: int, timeout_s: float) -> None:
    """Poll until rank 0's store listens: torch's own client retries with a backoff of up to
    tens of seconds when it connects before rank 0 has started the store."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.05)


def resolve_dp(world: int, pp_size: int, dp_size: int | None) -> int:
    """The data-parallel size of ``world`` processes for ``pp_size`` pipeline ranks:
    ``dp_size``, else world / ``pp_size`` when it divides, else 0 (no size fits)."""
    if dp_size is not None:
        return dp_size
    return world // pp_size if world % pp_size == 0 else 0


def make_mesh(pp_size: int, dp_size: int | None = None, device_type: str = "cpu") -> Mesh:
    """The ``pp x dp`` layout of the default group (see the module docstring); ``dp_size``
    defaults to world / ``pp_size`` (:func:`resolve_dp`).  SetupError when the world does not
    fit."""
    world, rank = dist.get_world_size(), dist.get_rank()
    dp_size = resolve_dp(world, pp_size, dp_size)
    if dp_size < 1 or pp_size * dp_size != world:
        raise SetupError(
            f"rank {rank}: the plan has {pp_size} pipeline ranks, so the {world} processes "
            f"(WORLD_SIZE) must be {pp_size} x the data-parallel size"
            + (
                f" ({dp_size} asked): start {pp_size * dp_size} processes"
                if dp_size  # else any multiple will do: not one count, as if dp had to be 1
                else f": start a multiple of {pp_size} processes"
            )
        )
    if dp_size == 1:
        return Mesh(pp_size, 1, rank, 0)
    from torch.distributed.device_mesh import init_device_mesh

    dm = init_device_mesh(device_type, (pp_size, dp_size), mesh_dim_names=("pp", "dp"))
    return Mesh(
        pp_size,
        dp_size,
        rank // dp_size,
        rank % dp_size,
        dm.get_group("pp"),
        dm.get_group("dp"),
        dm,
    )


def wait_all(works, timeout_s: float | None) -> None:
    """Wait for every ``Work`` in ``works``, each within ``timeout_s`` seconds (None: the
    process group's timeout); torch raises RuntimeError ("timed out") when one takes longer."""
    limit = datetime.timedelta(seconds=timeout_s) if timeout_s else None
    for w in works:
        if limit is None:
            w.wait()
        else:
            w.wait(timeout=limit)


def warm_up(pairs: set[tuple[int, int]], rank: int, device, group=None, timeout_s=None) -> None:
    """One symmetric one-element exchange per pair of global ranks, all ranks following the
    sorted pair order (a global order, so it cannot deadlock)."""
    for a, b in sorted(pairs):
        if rank not in (a, b):
            continue
        peer = b if rank == a else a
        out, into = torch.zeros(1, device=device), torch.empty(1, device=device)
        ops = [dist.P2POp(dist.isend, out, peer, group), dist.P2POp(dist.irecv, into, peer, group)]
        try:
            wait_all(dist.batch_isend_irecv(ops), timeout_s)
        except RuntimeError as e:
            raise comm_error(f"rank {rank}: warming up the link", (peer,), e, timeout_s) from None


def plan_pairs(plan: dict, to_global=lambda r: r) -> set[tuple[int, int]]:
    """The pairs of (global) ranks that exchange messages in the plan."""
    pairs = set()
    for r, prog in enumerate(plan["programs"]):
        for ins in prog:
            for o in ins.get("ops", ()):
                a, b = to_global(r), to_global(o["peer"])
                pairs.add((min(a, b), max(a, b)))
    return pairs
