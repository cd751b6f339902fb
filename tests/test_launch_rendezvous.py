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
