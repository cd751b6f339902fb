"""Run one command (``ppir launch ...``), inject a fault, and account for every process.

    python tests/fault_harness.py SPEC.json

SPEC: ``{"cmd": [...], "out": path, "action": "none" | "kill_rank" | "kill_launcher" |
"term_launcher" | "int_importing" | "int_launcher_torch" | "int_ranks_started", "rank": R,
"signal": N, "ranks": N (pid files to wait for), "piddir": dir, "delay": seconds, "deadline":
seconds}``.  ``int_importing`` sends the launcher SIGINT while its ranks import torch (each rank
has mapped libtorch, none has written its pid file yet), as a Ctrl-C right after ``ppir launch``
starts does; ``int_launcher_torch`` as soon as the launcher itself has mapped libtorch (its own
import of torch) and every 50 ms until it ends (Ctrl-C pressed again and again);
``int_ranks_started`` as soon as its ranks exist (each still starting Python, importing ppir).

The harness makes itself a child subreaper (``PR_SET_CHILD_SUBREAPER``), so every process the
command leaves behind becomes its child; after the command ends it waits up to 10 s for them
to exit, kills whatever is still running and reports it.  The report (JSON at ``out``):
``returncode``, ``elapsed`` (until the command ended), ``cleanup`` (until the last process was
gone), ``orphans`` (command lines of processes still alive 10 s after the command ended),
``stdout``, ``stderr``.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def children() -> list[int]:
    me, out = os.getpid(), []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            fields = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            out.append(int(d))
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "?"


def maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return ""


def ranks_of(launcher: int) -> list[int]:
    """The launcher's ``ppir.run`` children."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            fields = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == launcher and "ppir.run" in cmdline(int(d)):
                out.append(int(d))
        except (OSError, IndexError, ValueError):
            continue
    return out


def ranks_importing_torch(launcher: int) -> list[int]:
    """The launcher's ``ppir.run`` children that have begun importing torch."""
    return [pid for pid in ranks_of(launcher) if "libtorch" in maps(pid)]


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text())
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    out_f = open(spec["out"] + ".stdout", "w")
    err_f = open(spec["out"] + ".stderr", "w")
    start = time.monotonic()
    proc = subprocess.Popen(spec["cmd"], stdout=out_f, stderr=err_f)
    action = spec.get("action", "none")
    deadline = start + spec.get("deadline", 90)
    if action == "int_importing":
        while len(ranks_importing_torch(proc.pid)) < spec["ranks"]:
            if proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.005)
        if list(Path(spec["piddir"]).glob("*.pid")):
            print("fault_harness: the ranks finished importing first", file=sys.stderr)
        proc.send_signal(signal.SIGINT)
    elif action in ("int_launcher_torch", "int_ranks_started"):
        while time.monotonic() < deadline and proc.poll() is None:
            if action == "int_launcher_torch" and "libtorch" in maps(proc.pid):
                break
            if action == "int_ranks_started" and len(ranks_of(proc.pid)) >= spec["ranks"]:
                break
            time.sleep(0.005)
        proc.send_signal(signal.SIGINT)
        while action == "int_launcher_torch" and proc.poll() is None:  # Ctrl-C, Ctrl-C, ...
            time.sleep(0.05)
            if time.monotonic() > deadline or proc.poll() is not None:
                break
            proc.send_signal(signal.SIGINT)
    elif action != "none":
        piddir = Path(spec["piddir"])
        while len(list(piddir.glob("*.pid"))) < spec["ranks"] and time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        time.sleep(spec.get("delay", 1.0))
        sig = spec.get("signal", 9)
        if action == "kill_rank":
            os.kill(int((piddir / f"rank{spec['rank']}.pid").read_text()), sig)
        elif action in ("kill_launcher", "term_launcher"):
            proc.send_signal(sig)
    try:
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
        code = f"timeout ({code})"
    elapsed = time.monotonic() - start
    end = time.monotonic() + 10
    while children() and time.monotonic() < end:
        reap()
        time.sleep(0.05)
    reap()
    orphans = [cmdline(p) for p in children()]
    for p in children():
        os.kill(p, signal.SIGKILL)
    reap()
    out_f.close()
    err_f.close()
    report = {
        "returncode": code,
        "elapsed": elapsed,
        "cleanup": time.monotonic() - start,
        "orphans": orphans,
        "stdout": Path(spec["out"] + ".stdout").read_text(),
        "stderr": Path(spec["out"] + ".stderr").read_text(),
    }
    Path(spec["out"]).write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
