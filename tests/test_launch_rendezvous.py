"""``ppir launch`` when the rendezvous itself fails (before any rank starts): one line naming
the endpoint, no torch stack, within --rdzv-timeout."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
GPT = str(ROOT / "examples" / "gpt_model.py")


def launch(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ppir.cli", "launch", *argv, "--module", GPT, "--steps", "1"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_a_rendezvous_port_in_use_is_one_line():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        endpoint = f"127.0.0.1:{busy.getsockname()[1]}"
        res = launch("-n", "2", "1f1b", "-D", "M=2", "--rdzv-endpoint", endpoint)
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    assert f"ppir launch: failed: the rendezvous at {endpoint} failed: " in res.stderr
    assert "give --rdzv-endpoint a free one" in res.stderr


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_c10d_rendezvous_honours_rdzv_timeout():
    """One node of two under c10d: it gives up after --rdzv-timeout (torch's dynamic
    rendezvous reads join_timeout, not timeout: it used to wait its default 600 s)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        endpoint = f"127.0.0.1:{s.getsockname()[1]}"
    res = launch(
        "-n", "4", "--nnodes", "2", "--rdzv-backend", "c10d", "--run-id", "lonely",
        "--rdzv-endpoint", endpoint, "--rdzv-timeout", "2", "1f1b", "-D", "M=2",
    )  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    assert f"ppir launch: failed: the rendezvous at {endpoint} failed: " in res.stderr
    assert "--rdzv-timeout 2 s" in res.stderr


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_a_node_0_that_never_comes_is_one_line_without_cpp_logs():
    """Node 1 of 2 whose node 0 never starts: torch's store client logged each failed
    connection with a C++ stack (about 60 lines) before ppir's line; the launcher's torch now
    logs nothing from C++ unless --verbose."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        endpoint = f"127.0.0.1:{s.getsockname()[1]}"
    res = launch(
        "-n", "2", "--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", endpoint,
        "--rdzv-timeout", "2", "1f1b", "-D", "M=2",
    )  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert f"ppir launch: failed: the rendezvous at {endpoint} failed: " in res.stderr
    assert "[c10d]" not in res.stderr and "frame #" not in res.stderr, res.stderr
    assert len(res.stderr.splitlines()) == 1, res.stderr


def test_a_store_failure_that_is_no_timeout_is_not_blamed_on_the_start():
    """The agents read the store while the ranks run too: a failure there that is no timeout
    (the node holding the store went away) does not ask whether every node started."""
    from ppir.backends.cuda.launch import rendezvous_failure

    lost = rendezvous_failure("h:29500", 30, RuntimeError("Connection reset by peer"))
    assert lost == (
        "the rendezvous at h:29500 failed: Connection reset by peer (every node's agent talks "
        "through it: did a node stop, or the network fail?)"
    )
    late = rendezvous_failure("h:29500", 30, RuntimeError("Timed out after 31 seconds waiting"))
    assert "--rdzv-timeout 30 s for each other" in late

    class RendezvousTimeoutError(Exception):  # torch's, raised without a message
        pass

    bare = rendezvous_failure("h:29500", 30, RendezvousTimeoutError())
    assert bare.startswith("the rendezvous at h:29500 failed: RendezvousTimeoutError (")
    assert "--rdzv-timeout 30 s for each other" in bare


def test_the_start_line_counts_one_local_process_in_the_singular():
    """'-n 2 --nnodes 2' printed '1 local processes on node 0 of 2'."""
    from ppir.backends.cuda.launch import local_processes

    assert local_processes(1, 0, 2) == "1 local process on node 0 of 2"
    assert local_processes(2, 1, 2) == "2 local processes on node 1 of 2"
    assert local_processes(4, 0, 1) == "4 local processes"


def test_two_nodes_started_as_node_0_are_hinted_at():
    """Both nodes with --node-rank 0 on one host: one found the port in use ('give
    --rdzv-endpoint a free one'), the other timed out ('the same --rdzv-endpoint?')."""
    from ppir.backends.cuda.launch import rendezvous_failure

    busy = RuntimeError("The server socket has failed to listen ... EADDRINUSE ...")
    assert rendezvous_failure("h:1", 30, busy, nnodes=2).endswith(
        "give --rdzv-endpoint a free one (or another node of this run was also started with "
        "--node-rank 0))"
    )
    late = RuntimeError("Timed out after 31 seconds waiting for clients. 1/2 clients joined.")
    assert rendezvous_failure("h:1", 30, late, nnodes=2).endswith(
        "did every node start with the same --rdzv-endpoint and a --node-rank of its own?)"
    )
    assert rendezvous_failure("h:1", 30, late).endswith("the same --rdzv-endpoint?)")
