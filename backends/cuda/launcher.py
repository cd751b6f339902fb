"""Start P local ranks of a command the way torchrun does, and end them all on the first failure.

Contract of :func:`launch`:

* The launcher does not import torch (that costs seconds of CPU per launch): it picks a free
  port and rank 0 hosts the rendezvous store, as with a plain ``env://`` launch.
* Failing ranks write a report into a temporary ``PPIR_ERROR_DIR`` (see :func:`.procgroup.fail`);
  :attr:`LaunchResult.first_failure` is the earliest report that is the rank's own failure.
* Each rank gets ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``,
  ``MASTER_PORT`` and, unless set, ``OMP_NUM_THREADS=1``; output goes to the launcher's stdout
  and stderr (or to the given files).
* When a rank exits non-zero, the others get ``grace_s`` seconds to exit, then are killed;
  ``deadline_s`` bounds the whole run.  Nothing outlives :func:`launch`.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass


@dataclass
class LaunchResult:
    codes: list[int | None]
    first_failure: str | None  # the message the first failing rank recorded, if any
    timed_out: bool

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(c == 0 for c in self.codes)

    @property
    def exit_code(self) -> int:
        if self.ok:
            return 0
        return next((c for c in self.codes if c not in (0, None)), 1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank: int, world: int, port: int, base: dict | None = None) -> dict:
    env = dict(os.environ if base is None else base)
    env.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_WORLD_SIZE=str(world),
        GROUP_RANK="0",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def launch(
    cmd: list[str],
    nprocs: int,
    *,
    grace_s: float = 10.0,
    deadline_s: float | None = None,
    env: dict | None = None,
    stdout=None,
    stderr=None,
) -> LaunchResult:
    """Run ``cmd`` as ranks 0..nprocs-1 (see the module docstring)."""
    errdir = tempfile.mkdtemp(prefix="ppir-launch-")
    port = free_port()
    envs = [rank_env(r, nprocs, port, env) for r in range(nprocs)]
    for e in envs:
        e["PPIR_ERROR_DIR"] = errdir
    procs = [subprocess.Popen(cmd, env=e, stdout=stdout, stderr=stderr) for e in envs]
    start = time.monotonic()
    kill_at: float | None = None
    timed_out = False
    try:
        while True:
            codes = [p.poll() for p in procs]
            if all(c is not None for c in codes):
                break
            now = time.monotonic()
            if kill_at is None and any(c not in (None, 0) for c in codes):
                kill_at = now + grace_s
            if deadline_s is not None and now - start > deadline_s:
                timed_out = True
                kill_at = now
            if kill_at is not None and now >= kill_at:
                break
            time.sleep(0.05)
    finally:
        _stop_all(procs)
    codes = [p.returncode for p in procs]
    first = _first_failure(errdir)
    shutil.rmtree(errdir, ignore_errors=True)
    return LaunchResult(codes, first, timed_out)


def _first_failure(errdir: str) -> str | None:
    reports = []
    for name in os.listdir(errdir):
        try:
            with open(os.path.join(errdir, name)) as f:
                reports.append(json.load(f))
        except (OSError, ValueError):
            continue
    if not reports:
        return None
    own = [r for r in reports if not r.get("secondary")] or reports
    return min(own, key=lambda r: r["time"])["first"]


def _stop_all(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    end = time.monotonic() + 3.0
    for p in procs:
        try:
            p.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
