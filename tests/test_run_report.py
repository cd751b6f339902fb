"""ppir.run's collectives beside the steps (ppir.torch.run_report): a peer lost during the
replicas' loss average or the closing peak gather is the runtime's CommError naming the
rank and what it was doing, not torch's RuntimeError with its C++ stack."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402

from ppir.torch.errors import CommError  # noqa: E402
from ppir.torch.run_report import largest_peak, mean_over_replicas, summary  # noqa: E402

LOST = "[../gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:1234"
CTX = SimpleNamespace(rank=3, device=torch.device("cpu"), timeout_s=30.0)
MESH = SimpleNamespace(dp_size=2, dp_group=None)


def _raise(text):
    def collective(*args, **kwargs):
        raise RuntimeError(text)

    return collective


def test_a_lost_replica_during_the_loss_average_is_a_comm_error(monkeypatch):
    monkeypatch.setattr(dist, "all_reduce", _raise(LOST))
    with pytest.raises(CommError) as e:
        mean_over_replicas(torch.tensor(1.0), MESH, CTX, step=7)
    assert str(e.value) == (
        "rank 3: averaging step 7's loss over the data-parallel replicas: lost the connection "
        "to its peers (did it fail?): Connection closed by peer [127.0.0.1]:1234"
    )
    assert not e.value.timeout


def test_a_silent_rank_during_the_closing_peak_gather_is_a_timeout(monkeypatch):
    monkeypatch.setattr(dist, "get_world_size", lambda: 4)
    monkeypatch.setattr(dist, "all_gather", _raise("Timed out waiting 30000ms for recv"))
    with pytest.raises(CommError) as e:
        largest_peak(2, CTX, dp=1)
    assert str(e.value).startswith(
        "rank 3: gathering every rank's peak activations after the last step: no answer from "
        "its peers within the 30 s timeout (is it stuck?)"
    )
    assert e.value.timeout


def test_the_loss_average_divides_by_the_replicas_and_leaves_the_runtimes_tensor(monkeypatch):
    def all_reduce(t, group=None):  # the other replica's loss is 3
        t += 3.0

    monkeypatch.setattr(dist, "all_reduce", all_reduce)
    mine = torch.tensor(1.0)
    assert float(mean_over_replicas(mine, MESH, CTX, step=0)) == 2.0
    assert float(mine) == 1.0
    one = SimpleNamespace(dp_size=1, dp_group=None)
    assert mean_over_replicas(mine, one, CTX, step=0) is mine
    assert mean_over_replicas(None, MESH, CTX, step=0) is None


def test_the_peak_gather_names_the_pipeline_rank_of_the_largest_peak(monkeypatch):
    monkeypatch.setattr(dist, "get_world_size", lambda: 4)

    def all_gather(out, mine):  # global ranks 0..3 = pipeline rank * dp + replica
        for t, v in zip(out, (1, 2, 5, 5)):
            t.fill_(v)

    monkeypatch.setattr(dist, "all_gather", all_gather)
    assert largest_peak(1, CTX, dp=2) == (5, 1)


def test_the_summary_line_leaves_out_the_first_step():
    import ppir
    from ppir.plan import build_plan

    plan = build_plan(ppir.compile(ppir.load("1f1b", P=2, M=4)).program)
    line = summary([9.0, 0.010, 0.020], 1, 0, plan)
    assert line == (
        "ppir.run: 3 steps, mean step time 15.0 ms (steps 1..2), peak in-flight activations "
        "1 A on rank 0 (1 chunk activation), the most of any rank"
    )


def test_a_timeout_under_two_seconds_is_named_as_a_possible_cause():
    from ppir.torch.errors import comm_error

    err = RuntimeError("Timed out waiting 500ms for send operation to complete")
    short = comm_error("rank 1: comparing make_batch(1) across the ranks", (), err, 0.5)
    assert str(short) == (
        "rank 1: comparing make_batch(1) across the ranks: no answer from its peers within the "
        "0.5 s timeout (is it stuck, or is the timeout too short?): Timed out waiting 500ms for "
        "send operation to complete"
    )
    assert "(is it stuck?)" in str(comm_error("rank 1: x", (2,), err, 2.0))


def test_a_long_torch_message_is_cut_at_a_word():
    from ppir.torch.errors import comm_error

    words = "Connection closed by peer [127.0.0.1]:29500; " + "Check the logs of the remote " * 9
    text = str(comm_error("rank 0", (1,), RuntimeError(words), 30.0))
    assert text.endswith(" ...") and len(text) < 250
    cut = text.split("(did it fail?): ", 1)[1][: -len(" ...")]
    assert words.startswith(cut) and words[len(cut)] == " "  # whole words only
