"""Messages write their plurals with ppir.diagnostics.count, verbs agreeing: "1 send ... has",
"2 sends ... have" (was "1 send(s) ... have"; tests/test_architecture.py keeps "(s)" out)."""

from __future__ import annotations

# rank 0 sends microbatches 0..2 to rank 1; rank 1 receives only the first `recvs` of them
_SENDS = """ranks 2
stages 2
microbatches 3
rank 0: 0F0 [0SEND_F0] 0F1 [0SEND_F1] 0F2 [0SEND_F2]
rank 1: {recvs} 1F0 1F1 1F2
"""


def test_a_count_of_one_reads_singular_and_its_verb_agrees(tmp_path, cli):
    f = tmp_path / "sends.pps"
    f.write_text(_SENDS.format(recvs="[1RECV_F0] [1RECV_F1]"))
    code, _, err = cli("check", str(f))
    assert code == 1
    assert "posts only 2 recvs from rank 0" in err
    assert "hint: 1 send on channel 0->1 has no recv; the sender would hang" in err
    f.write_text(_SENDS.format(recvs="[1RECV_F0]"))
    code, _, err = cli("check", str(f))
    assert code == 1
    assert "posts only 1 recv from rank 0" in err
    assert "hint: 2 sends on channel 0->1 have no recv; the sender would hang" in err

    code, out, err = cli("fuzz", "1f1b", "--over", "P=2", "--over", "M=4", "-q")
    assert code == 0, err
    assert out.startswith("ok: 1f1b: 1 parameter choice holds (verifies) for P in 2, M in 4")
    code, out, err = cli("fuzz", "1f1b", "--over", "P=2", "--over", "M=4..5", "-q")
    assert code == 0, err
    assert out.startswith("ok: 1f1b: 2 parameter choices hold (verifies) for P in 2, M in 4..5")
