"""A peer that does not join the process group within the timeout is the runtime's one-line
CommError naming the rank: it was torch's DistStoreError, which ``ppir launch`` reported with a
traceback and without a rank (``ppir launch: failed: DistStoreError: wait timeout after
3000ms, keys: /default_pg/0//cpu//0/1``) when one rank started more slowly than --timeout."""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("torch")

from ppir.torch import procgroup  # noqa: E402
from ppir.torch.errors import CommError  # noqa: E402


@pytest.mark.timeout(60)
def test_a_peer_that_never_joins_is_a_comm_error_naming_the_rank(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for k, v in dict(
        RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    ).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    with pytest.raises(CommError) as e:
        procgroup.init(device="cpu", timeout_s=1)
    assert str(e.value).startswith(
        "rank 0: joining the process group: no answer from its peers within the 1 s timeout"
    ), str(e.value)
    assert e.value.timeout
