"""Start the ranks of ``ppir profile``, gather their samples, and build the measured costs.

:func:`profile` runs ``ranks`` processes (``torch.multiprocessing`` spawn, a TCP rendezvous on
127.0.0.1, gloo on CPU or NCCL on GPUs, one GPU per rank) or, for one rank, measures in this
process.  It returns a :class:`ppir.analysis.measured.MeasuredCosts`.  Mistakes in the request
(stages not a multiple of ranks, a model module without the contract) raise :class:`ProfileError`;
an exception inside the user's model propagates with its traceback (printed by the failing rank
process, then :class:`ProfileFailed`).
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ppir.analysis.measured import MeasuredCosts
from ppir.profile.errors import (
    OptimizerNotMeasured,
    ProfileError,
    ProfileFailed,
    comm,
    failure,
    others,
    record_error,
    usage,
)
from ppir.profile.summary import cpu_cores, summarize  # noqa: F401 (the profile's API)


@dataclass(frozen=True)
class ProfileSpec:
    model: str
    options: dict = field(default_factory=dict)
    ranks: int = 2
    stages: int = 0  # 0: one per rank
    microbatches: int = 0  # 0: 2 * ranks
    steps: int = 18  # the CLI's default (ppir profile --help says why)
    warmup: int = 2
    device: str = "auto"
    threads: int = 0  # 0: cores / ranks
    timeout: float = 120.0
    orders: bool = True  # the further orders (near and far times), where they can run

    @property
    def num_stages(self) -> int:
        return self.stages or self.ranks

    @property
    def num_microbatches(self) -> int:
        return self.microbatches or 2 * self.ranks

    @property
    def further_orders(self) -> tuple[str, ...]:
        """The further orders this profile runs (:func:`ppir.profile.orders.orders`)."""
        from ppir.profile.orders import orders

        if not self.orders:
            return ()
        return orders(self.ranks, self.num_stages, self.num_microbatches)

    @property
    def total_steps(self) -> int:
        """The steps rank 0 runs: warm-up, timed, and the further orders' (:mod:`.orders`)."""
        from ppir.profile.orders import order_steps

        more = len(self.further_orders)
        return self.warmup + self.steps + more * (1 + order_steps(self.steps))


def check_spec(spec: ProfileSpec) -> None:
    if spec.ranks < 1:
        raise ProfileError(f"--ranks must be positive, got {spec.ranks}")
    if spec.num_stages % spec.ranks:
        raise ProfileError(
            f"--stages {spec.num_stages} must be a multiple of --ranks {spec.ranks} (each rank "
            "holds the same number of consecutive pieces)"
        )
    if spec.num_microbatches < 1:
        raise ProfileError(f"--microbatches must be positive, got {spec.num_microbatches}")
    if spec.steps < 2:
        raise ProfileError(
            f"--steps {spec.steps}: at least 2 (the timed steps alternate whole backwards, "
            "split ones, I then W, and from the third on I then a deferred W)"
        )
    if spec.warmup < 0:
        raise ProfileError(f"--warmup must be 0 or more, got {spec.warmup}")


def load_model(spec: str, options: dict | None = None):
    """The runtime's :func:`ppir.torch.model.load_model` (import, check the API, apply
    options), its :class:`ModelError` raised as a :class:`ProfileError`."""
    from ppir.torch.errors import ModelError
    from ppir.torch.model import load_model as load

    try:
        return load(spec, options)
    except ModelError as e:
        raise ProfileError(str(e)) from None


def _rank_main(
    rank: int, spec: ProfileSpec, port: int, out: str, batch=None, model=None, on_step=None
) -> None:
    """Measure one rank and write its samples to ``out``; ``batch`` and ``model``:
    ``make_batch(0)`` and the configured model module where the caller (one rank, in this
    process) has made and checked them already (``configure`` runs once per process);
    ``on_step(n)``: the steps done so far (rank 0 of several writes them for the parent to read:
    :func:`_write_steps`)."""
    import torch
    import torch.distributed as dist

    from ppir.profile.measure import measure_rank
    from ppir.profile.pieces import build

    P = spec.ranks
    if on_step is None and rank == 0 and P > 1:
        on_step = lambda n: _write_steps(out, n)  # noqa: E731
    torch.set_num_threads(spec.threads or max(1, (os.cpu_count() or 1) // P))
    device = _device(spec.device, rank)
    if P > 1:
        dist.init_process_group(
            "nccl" if device.type == "cuda" else "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=P,
            timeout=datetime.timedelta(seconds=spec.timeout),
        )
    try:
        model = model or load_model(spec.model, spec.options)
        S, k = spec.num_stages, spec.num_stages // P
        pieces = [build(model, j, S, device) for j in range(rank * k, rank * k + k)]
        schedule, program = _program(P, spec.num_microbatches, rank)
        samples, transfer, groups, positions, walls = measure_rank(
            rank,
            P,
            pieces,
            model,
            program,
            schedule,
            spec.num_microbatches,
            spec.steps,
            spec.warmup,
            device,
            batch,
            spec.timeout,
            on_step,
            spec.orders,
        )
        data = gather(rank, P, samples, transfer, groups, device.type, positions, walls)
        if rank == 0:
            Path(out).write_text(json.dumps(data))
        if P > 1:  # nobody leaves while another still talks to the store rank 0 hosts: a rank
            # tearing down its group after rank 0 left aborted (std::terminate)
            comm(f"rank {rank}: finishing", others(rank, P), dist.barrier, timeout_s=spec.timeout)
    except Exception as e:
        err = usage(e)
        if P > 1:  # stamped now, before the teardown, so that the first error is the earliest
            record_error(out, rank, err)
        if err is not e:
            raise err from None
        raise
    finally:
        if P > 1:
            dist.destroy_process_group()


def gather(
    rank: int, P: int, samples, transfer, groups, device: str, positions=(), walls=()
) -> dict | None:
    """Every rank's samples and groups on rank 0 (collective): the JSON :func:`summarize` reads,
    or None on the other ranks; ``positions``: the rank's samples in the further orders,
    (piece, samples by position) (:meth:`ppir.profile.orders.Order.positions`); ``walls``: the
    timed steps' (kind, wall, processor) seconds (:func:`ppir.profile.measure.measure_rank`):
    rank 0's kind and wall, and the processor seconds of every rank together."""
    import torch

    from ppir.torch.objects import all_gather_objects

    mine = {"pieces": [asdict(s) for s in samples], "groups": groups, "orders": list(positions)}
    mine["walls"] = [list(w) for w in walls]
    box = [mine]
    if P > 1:  # on every rank (without numpy: ppir.torch.objects); rank 0 keeps them
        where = f"rank {rank}: gathering the ranks' samples"
        box = comm(where, others(rank, P), all_gather_objects, mine)
    if rank != 0:
        return None
    return {
        "pieces": [p for part in box for p in part["pieces"]],
        "groups": [part["groups"] for part in box],
        "orders": [p for part in box for p in part["orders"]],
        "transfer_isolated": transfer,
        "step_walls": [  # the ranks' processes' processor seconds, summed
            [kind, t, sum(part["walls"][j][2] for part in box)]
            for j, (kind, t, _) in enumerate(walls)
        ],
        "device": device,
        "threads": torch.get_num_threads(),  # one: an op's processor time is its thread's
    }


def _device(requested: str, rank: int, current: bool = True):
    """Rank ``rank``'s device: the runtime's checks (:func:`ppir.torch.procgroup.pick_device`;
    a ProfileError for a device this machine lacks), one GPU per rank (``cuda:N`` too: the
    messages are timed between devices), made current unless ``current`` is False."""
    import torch

    from ppir.torch.errors import SetupError
    from ppir.torch.procgroup import pick_device

    try:
        dev = pick_device(requested, rank)
    except SetupError as e:
        raise ProfileError(str(e)) from None
    if dev.type == "cuda":
        dev = torch.device("cuda", rank % max(1, torch.cuda.device_count()))
        if current:
            torch.cuda.set_device(dev)
    return dev


def _program(P: int, M: int, rank: int):
    """The 1F1B program 'ppir launch' runs (ppir.compile: lowered and overlapped)."""
    from ppir.profile.orders import program

    return program("1f1b", {"P": P, "M": M}, rank)


def check_batch(batch, M: int) -> int | None:
    """A :class:`ProfileError` unless ``batch`` (``make_batch(0)``) is an (inputs, targets)
    pair, each a tensor or a tuple, list or dict of tensors (as the runtime takes it), whose
    every tensor's dim 0 splits into ``M`` equal microbatches; -> the samples of one
    microbatch (dim 0 of the inputs / M; None for inputs without a tensor)."""
    from ppir.torch import values as V

    if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
        raise ProfileError(
            f"make_batch(0) returned {type(batch).__name__}, expected (inputs, targets)"
        )
    for name, value in zip(("inputs", "targets"), batch):
        try:  # the runtime's own rule and words (values.flatten, values.split_batch)
            V.check_batch(value, "make_batch(0)", name)
            V.split_batch(value, M, f"make_batch(0) {name}")
        except TypeError as e:
            raise ProfileError(str(e)) from None
        except ValueError as e:
            raise ProfileError(f"{e}; pass a -M that divides it") from None
    first = V.flatten(batch[0])[0]
    return first[0].shape[0] // M if first else None


def _write_steps(out: str, n: int) -> None:
    """Rank 0's count of the steps done, for the parent's progress (replaced whole: a reader
    never sees half a number)."""
    Path(f"{out}.steps.tmp").write_text(str(n))
    os.replace(f"{out}.steps.tmp", f"{out}.steps")


def _read_steps(out: str) -> int | None:
    try:
        return int(Path(f"{out}.steps").read_text())
    except (OSError, ValueError):  # not written yet
        return None


def profile(spec: ProfileSpec, on_step=None) -> MeasuredCosts:
    """Measure (see :mod:`ppir.profile`) and return the measured costs of ``spec``;
    ``on_step(n)`` is told the steps done (of ``spec.total_steps``) as they end."""
    check_spec(spec)
    _device(spec.device, 0, current=False)  # a device this machine lacks, before any rank
    model = load_model(spec.model, spec.options)  # and a bad module
    batch = model.make_batch(0)
    size = check_batch(batch, spec.num_microbatches)  # and a batch M does not split
    with tempfile.TemporaryDirectory(prefix="ppir-profile-") as tmp:
        out = os.path.join(tmp, "samples.json")
        if spec.ranks == 1:
            _rank_main(0, spec, 0, out, batch, model, on_step)  # configure, make_batch: once
        else:
            _run_ranks(spec, tmp, out, on_step)
        data = json.loads(Path(out).read_text())
    if size:
        data["microbatch_size"] = size
    why = next((p["optimizer_error"] for p in data["pieces"] if p.get("optimizer_error")), "")
    if why:  # the user's mistake in make_optimizer, as a rule: its traceback, not a silent "-"
        warnings.warn(OptimizerNotMeasured(why), stacklevel=2)
    return summarize(spec, data)


def _run_ranks(spec: ProfileSpec, tmp: str, out: str, on_step=None) -> None:
    """``python -m ppir.profile.launch`` once per rank; the first failure stops the others;
    ``on_step(n)`` hears rank 0's count of steps done as it changes."""
    path = os.path.join(tmp, "spec.json")
    Path(path).write_text(json.dumps(asdict(spec)))
    port = str(_free_port())
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(spec.threads or 1))
    cmd = [sys.executable, "-m", "ppir.profile.launch", path, port, out, str(os.getpid())]
    procs = [subprocess.Popen([*cmd, str(r)], env=env) for r in range(spec.ranks)]
    deadline = time.monotonic() + spec.timeout * 4
    late = False
    told = [0]

    def tell() -> None:  # rank 0's count of steps done, when it changed
        done = _read_steps(out) if on_step is not None else None
        if done is not None and done != told[0]:
            told[0] = done
            on_step(done)

    try:
        while any(p.poll() is None for p in procs):
            tell()
            if any(p.returncode not in (None, 0) for p in procs):
                grace = time.monotonic() + 2  # the others fail on their own and say why
                while any(p.poll() is None for p in procs) and time.monotonic() < grace:
                    time.sleep(0.05)
                break
            if time.monotonic() > deadline:
                late = True
                break
            time.sleep(0.05)
    finally:
        stopped = set()  # the ranks this process stopped (after another's failure, say)
        for r, p in enumerate(procs):
            if p.poll() is None:
                p.terminate()
                stopped.add(r)
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    codes = [p.returncode for p in procs]
    if late:
        raise ProfileFailed(
            f"ppir profile: the ranks did not finish within {spec.timeout * 4:g} s (4 x "
            "--timeout) and were stopped"
        )
    if any(codes):
        raise failure(out, codes, stopped)
    tell()  # the last count, when the ranks ended between two looks


def _child(argv: list[str]) -> int:
    spec_path, port, out, parent, rank = argv
    from ppir.torch.failures import die_with_parent

    die_with_parent(int(parent))  # a killed 'ppir profile' takes its ranks with it
    spec = ProfileSpec(**json.loads(Path(spec_path).read_text()))
    try:
        _rank_main(int(rank), spec, int(port), out)
    except Exception as e:  # recorded for the parent, which reports the earliest rank's once
        if not Path(f"{out}.error.{rank}").exists():  # raised before the process group
            record_error(out, int(rank), e)
        sys.stderr.flush()
        os._exit(1)
    from ppir.torch.leave import leave

    leave(0)  # done, the results written; without finalising the interpreter (see ppir.torch.leave)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
