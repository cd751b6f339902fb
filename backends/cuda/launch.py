"""``ppir launch`` on the cuda backend: write the verified program's plan and start the ranks
of ``python -m ppir.run`` with torch's elastic agent (what torchrun runs).

Contract:

* The agent (``torch.distributed.launcher.api.elastic_launch``) starts this node's ranks,
  hosts the rendezvous store (so rank 0's death does not take it away), and on the first rank
  that ends non-zero stops the others (SIGTERM, then SIGKILL).  SIGTERM/SIGHUP to the
  launcher are forwarded to every rank; SIGINT (Ctrl-C) stops every rank with SIGTERM, which
  ends a rank silently wherever it is (a SIGINT reaching a rank still importing ppir, before
  :func:`ppir.torch.failures.stop_on_interrupt`, printed a KeyboardInterrupt traceback); ranks
  die with the launcher even on SIGKILL (:func:`ppir.torch.failures.die_with_parent`).
* Several nodes: every node runs the same ``ppir launch`` with ``--nnodes N --node-rank K
  --rdzv-endpoint HOST:PORT`` (node 0's address; static rendezvous, as torchrun's
  ``--master-addr/--master-port``), or ``--rdzv-backend c10d`` with a shared ``--run-id``.
  ``-n`` is the total number of processes; each node starts ``n / N``.
* After a failure the launcher prints the root cause once (:mod:`.outcome`): the rank, the
  cause and, for an exception in the user's code, its traceback; then how each rank ended.
  Exit status 1 (128 + the signal when the launcher itself was signalled).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass, field

from ppir.backends.cuda.outcome import Cause, RankEnd, ended_with_0, root_cause, summary

from ppir.diagnostics import EXIT_USAGE
from ppir.torch.errors import first_line
from ppir.torch.failures import LAUNCHER_ENV, STACK_SUFFIX


def runtime_argv(args) -> list[str]:
    """``ppir.run`` options from ``ppir launch``'s arguments."""
    out = ["--module", args.module, "--steps", str(args.steps)]
    if args.lr is not None:
        out += ["--lr", repr(args.lr)]
    out += ["--device", args.device, "--timeout", repr(args.timeout)]
    out += ["--tolerance", repr(args.tolerance), "--on-nonfinite", args.on_nonfinite]
    out += ["--tied", args.tied]
    for opt in args.module_opt:
        out += ["--module-opt", opt]
    for flag, value in (
        ("--dist-backend", args.dist_backend),
        ("--dump-plan", args.dump_plan),
        ("--dp", args.dp),
        ("--verify-steps", args.verify_steps),
    ):
        if value:
            out += [flag, str(value)]
    if args.verify_grads:
        out.append("--verify-grads")
    if getattr(args, "no_verify", False):
        out.append("--no-verify")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Outcome:
    """How a launch ended: ``code`` (0; 1; 2 when the root cause is the model breaking the
    runtime's contract; or 128 + signal), the root cause and the ranks'
    ends (empty when every rank succeeded)."""

    code: int
    cause: Cause | None = None
    ends: list = field(default_factory=list)
    stopped_by: str | None = None  # the signal that stopped the launcher itself
    sent: str | None = None  # the signal the agent sent the ranks then (None: none started)

    @property
    def ok(self) -> bool:
        return self.code == 0


def start(
    cmd: tuple,
    nproc_per_node: int,
    *,
    nnodes: int = 1,
    node_rank: int = 0,
    endpoint: str | None = None,
    rdzv_backend: str = "static",
    run_id: str | None = None,
    rdzv_timeout: int = 300,
    log_dir: str | None = None,
    verbose: bool = False,
) -> Outcome:
    """Run ``python CMD...`` as this node's ranks under torch's elastic agent (the module
    docstring); never raises for a rank's failure."""
    import torch.distributed.launcher.api as elastic
    from torch.distributed import DistError
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous import RendezvousError

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with (
        tempfile.TemporaryDirectory(prefix="ppir-logs-") as tmp,
        _ranks_env(),
        _quiet_agent(verbose),
        _interrupt_stops_ranks(SignalException) as interrupted,
    ):
        config = elastic.LaunchConfig(
            min_nodes=nnodes,
            max_nodes=nnodes,
            nproc_per_node=nproc_per_node,
            run_id=run_id or ("ppir" if rdzv_backend == "static" else uuid.uuid4().hex[:12]),
            rdzv_backend=rdzv_backend,
            rdzv_endpoint=endpoint or f"127.0.0.1:{free_port()}",
            # static reads "timeout"; c10d (dynamic rendezvous) reads "join_timeout" only
            rdzv_configs={"rank": node_rank, "timeout": rdzv_timeout}
            if rdzv_backend == "static"
            else {"timeout": rdzv_timeout, "join_timeout": rdzv_timeout},
            max_restarts=0,
            monitor_interval=0.1,
            logs_specs=DefaultLogsSpecs(log_dir=log_dir or tmp),
            **_agent_signals(elastic.LaunchConfig),
        )
        try:
            elastic.elastic_launch(config, sys.executable)(*cmd)
        except ChildFailedError as e:
            ends = []
            attempt = _attempt_dir(e.failures.values())
            for rank, f in e.failures.items():
                data = f.error_file_data if isinstance(f.error_file_data, dict) else {}
                stack = (
                    _read_text(os.path.join(attempt, str(f.local_rank), STACK)) if attempt else None
                )
                ends.append(RankEnd(int(rank), int(f.exitcode), data.get("ppir"), stack))
            local = {int(rank): int(f.local_rank) for rank, f in e.failures.items()}
            ends += [RankEnd(r, 0, None) for r in ended_with_0(local, nproc_per_node)]
            cause = root_cause(ends)
            return Outcome(EXIT_USAGE if cause is not None and cause.usage else 1, cause, ends)
        except SignalException as e:
            if interrupted:
                return Outcome(130, stopped_by="SIGINT", sent="SIGTERM")
            name = getattr(e.sigval, "name", str(e.sigval))
            return Outcome(128 + int(e.sigval), stopped_by=name, sent=name)
        except KeyboardInterrupt:  # before the agent started any rank
            return Outcome(130, stopped_by="SIGINT")
        except (DistError, RendezvousError) as e:  # the agent's own store or rendezvous
            text = rendezvous_failure(config.rdzv_endpoint, rdzv_timeout, e, nnodes)
            return Outcome(1, Cause(text))
    return Outcome(0)


STACK = "error.json" + STACK_SUFFIX


def _attempt_dir(failures) -> str | None:
    """The agent's folder of this attempt's per-rank folders (``<attempt>/<local rank>/``,
    each holding a rank's error file): torch names a terminated rank's file ``<N/A>``, so its
    stack dump is found beside the file of a rank that failed itself."""
    for f in failures:
        if os.path.isabs(f.error_file):
            return os.path.dirname(os.path.dirname(f.error_file))
    return None


def _read_text(path: str) -> str | None:
    """The file's text; None when it is missing, empty or unreadable."""
    try:
        with open(path, errors="replace") as f:
            return f.read() or None
    except OSError:
        return None


def rendezvous_failure(endpoint: str, timeout: int, e: BaseException, nnodes: int = 1) -> str:
    """One line for a rendezvous that failed in the agent (a port in use, a node that never
    came): torch's first line, without its stack, and what to check.  With several nodes, two
    started as node 0 on one host showed as a port in use for one and a timeout for the
    other, whose hints asked only for a free port and the same endpoint."""
    text = first_line(e)
    if "EADDRINUSE" in text or "address already in use" in text:
        hint = "another process holds this port: give --rdzv-endpoint a free one"
        if nnodes > 1:
            hint += " (or another node of this run was also started with --node-rank 0)"
    elif any(w in f"{text} {type(e).__name__}".lower() for w in ("timed out", "timeout")):
        hint = (
            f"the nodes wait --rdzv-timeout {timeout} s for each other: did every node start "
            "with the same --rdzv-endpoint"
            + (" and a --node-rank of its own?" if nnodes > 1 else "?")
        )
    else:  # the agents also read the store while the ranks run (a node that went away)
        hint = "every node's agent talks through it: did a node stop, or the network fail?"
    return f"the rendezvous at {endpoint} failed: {text} ({hint})"


def _agent_signals(config_type) -> dict:
    """The agent handles SIGTERM, SIGHUP and SIGQUIT (forwarded to the ranks) but not SIGINT
    (:func:`_interrupt_stops_ranks`), where torch's LaunchConfig can say so (torch >= 2.6)."""
    names = {f.name for f in dataclasses.fields(config_type)}
    return {"signals_to_handle": "SIGTERM,SIGHUP,SIGQUIT"} if "signals_to_handle" in names else {}


@contextlib.contextmanager
def _interrupt_stops_ranks(signal_exception):
    """SIGINT raises the agent's ``signal_exception`` for SIGTERM, which the agent sends every
    rank (module docstring); yields a list that is not empty once SIGINT came."""
    came: list[int] = []
    if threading.current_thread() is not threading.main_thread():  # no handler to set there
        yield came
        return

    def handler(signum, frame):
        came.append(signum)
        raise signal_exception(f"Process {os.getpid()} got signal: {signum}", signal.SIGTERM)

    old = signal.signal(signal.SIGINT, handler)
    try:
        yield came
    finally:
        signal.signal(signal.SIGINT, old)


@contextlib.contextmanager
def _ranks_env():
    """The ranks inherit :data:`LAUNCHER_ENV`: they leave failures and interruptions to the
    launcher's report (:mod:`ppir.torch.failures`)."""
    old = os.environ.get(LAUNCHER_ENV)
    os.environ[LAUNCHER_ENV] = "1"
    try:
        yield
    finally:
        if old is None:
            del os.environ[LAUNCHER_ENV]
        else:
            os.environ[LAUNCHER_ENV] = old


@contextlib.contextmanager
def _quiet_agent(verbose: bool):
    """Without ``--verbose``, the elastic agent's loggers (each of its modules sets its own
    level) say nothing: the launcher reports how the run ended itself.  The rendezvous
    backends are imported first, so that their loggers are among them."""
    import torch.distributed.elastic.rendezvous.c10d_rendezvous_backend  # noqa: F401
    import torch.distributed.elastic.rendezvous.dynamic_rendezvous  # noqa: F401
    import torch.distributed.elastic.rendezvous.static_tcp_rendezvous  # noqa: F401

    names = [
        n for n in logging.Logger.manager.loggerDict if n.startswith("torch.distributed.elastic")
    ]
    loggers = [logging.getLogger(n) for n in ("torch.distributed.elastic", *names)]
    levels = [lg.level for lg in loggers]
    if not verbose:
        for lg in loggers:
            lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def report(out: Outcome) -> int:
    """Print a failed outcome (the root cause once, then how each rank ended); its exit code."""
    if out.stopped_by:
        ranks = f": every rank was sent {out.sent}" if out.sent else " before any rank started"
        print(f"ppir launch: stopped by {out.stopped_by}{ranks}", file=sys.stderr)
    elif not out.ok:
        if out.cause is not None:
            print(f"ppir launch: failed: {out.cause.message}", file=sys.stderr)
            if out.cause.traceback:
                print(out.cause.traceback.rstrip("\n"), file=sys.stderr)
        if out.ends:
            print(f"ppir launch: {summary(out.ends, out.cause)}", file=sys.stderr, flush=True)
    return out.code


def local_processes(n: int, node_rank: int, nnodes: int) -> str:
    """``2 local processes``, ``1 local process on node 0 of 2``: what this node starts."""
    text = f"{n} local process{'' if n == 1 else 'es'}"
    return text + (f" on node {node_rank} of {nnodes}" if nnodes > 1 else "")


def launch_schedule(s, args) -> int:
    """Run the verified, lowered schedule ``s`` (see the module docstring)."""
    from ppir.plan import PlanError, build_plan, plan_summary, save_plan
    from ppir.torch.run import quiet_numpy_warning

    quiet_numpy_warning()
    if args.dump_plan and args.nnodes == 1:  # rank 0 is here: a path it cannot write, now
        from ppir.cli.argtypes import output_path

        output_path(args.dump_plan)  # not after the first step, in the rank's traceback

    try:
        import torch.distributed.launcher.api  # noqa: F401
    except ImportError:
        print("ppir: error: ppir launch needs PyTorch: pip install 'ppir[torch]'", file=sys.stderr)
        return EXIT_USAGE
    try:
        plan = build_plan(s)
    except PlanError as e:
        print(f"ppir: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    nnodes, dp = args.nnodes, args.dp or 1
    per_node = s.ranks * dp // nnodes
    with tempfile.TemporaryDirectory(prefix="ppir-plan-") as tmp:
        path = args.plan_out or os.path.join(tmp, "plan.json")
        save_plan(plan, path)  # --plan-out unwritable: a one-line bad-output error
        where = local_processes(per_node, args.node_rank, nnodes)
        replicas = f" x {dp} data-parallel replicas" if dp > 1 else ""
        print(f"ppir launch: {plan_summary(plan)}{replicas}; {where}", flush=True)
        out = start(
            ("-m", "ppir.run", path, *runtime_argv(args)),
            per_node,
            nnodes=nnodes,
            node_rank=args.node_rank,
            endpoint=args.rdzv_endpoint,
            rdzv_backend=args.rdzv_backend,
            run_id=args.run_id,
            rdzv_timeout=args.rdzv_timeout,
            verbose=args.verbose,
        )
    return report(out)
