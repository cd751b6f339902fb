"""A rank that trained successfully exits 0: the failure watchdog (a daemon thread polling the
rendezvous store) is out of the store before the interpreter ends.  A daemon thread still in a
store call at exit is unwound through C++ and aborts the process with "terminate called without
an active exception" (SIGABRT): two CI runs lost a finished ``ppir launch`` rank that way."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading

import pytest

pytest.importorskip("torch")

# A store, channels whose watchdogs poll it without pause (so one is inside a store call at
# almost every moment), then the normal end of a rank: stop them and let the interpreter exit.
CHILD = """
import datetime, os, sys, time
import torch.distributed as dist
from ppir.torch.failures import FailureChannel
port = int(sys.argv[1])
server = dist.TCPStore("127.0.0.1", port, is_master=True, timeout=datetime.timedelta(seconds=10))
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
channels = [FailureChannel.connect(0, 10.0) for _ in range(8)]  # 8 watchdogs: one is
assert all(channels)                                             # in a call at exit
for channel in channels:
    channel.start_watchdog(interval_s=0.0)
time.sleep(0.2)
stopped = [channel.stop() for channel in channels]
print("stuck" if False in stopped else "done", flush=True)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("trial", range(3))
def test_a_rank_ends_cleanly_while_its_watchdog_polls_the_store(trial):
    res = subprocess.run(
        [sys.executable, "-c", CHILD, str(free_port())],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "terminate called" not in res.stderr, res.stderr
    assert res.returncode == 0 and res.stdout.strip() == "done", res.stdout + res.stderr


def test_stop_waits_for_the_watchdog_unless_told_not_to():
    from ppir.torch.failures import FailureChannel

    entered, release = threading.Event(), threading.Event()

    class SlowStore:  # a store call that blocks until released
        def check(self, keys):
            entered.set()
            release.wait(5)
            return False

    channel = FailureChannel(SlowStore(), 0, "k", timeout_s=5)
    channel.start_watchdog(interval_s=0.0)
    assert entered.wait(5)
    assert channel.stop(wait=False) is True  # returns at once, the thread still in the store
    assert channel._thread.is_alive()
    threading.Timer(0.2, release.set).start()
    assert channel.stop() is True  # waited for it to leave
    assert not channel._thread.is_alive()


def test_stop_says_so_when_the_watchdog_stays_stuck_past_the_store_timeout():
    from ppir.torch.failures import FailureChannel

    entered, release = threading.Event(), threading.Event()

    class StuckStore:
        def check(self, keys):
            entered.set()
            release.wait(10)
            return False

    channel = FailureChannel(StuckStore(), 0, "k", timeout_s=0.0)  # stop waits 1 s at most
    channel.start_watchdog(interval_s=0.0)
    assert entered.wait(5)
    try:
        assert channel.stop() is False
    finally:
        release.set()


def test_a_store_that_went_away_is_asked_once():
    """The node hosting the store (node 0's launcher) went away: each failed store call
    logged a C++ stack in the rank (torch's store client), and the watchdog's polls and
    fail()'s wait for another rank's record asked again and again (dozens of stacks on node
    1).  After the first failed call the channel asks the store nothing more."""
    from ppir.torch.failures import FailureChannel

    class GoneStore:
        calls = 0

        def _gone(self, *args):
            GoneStore.calls += 1
            raise RuntimeError("Connection reset by peer")

        check = get = compare_set = _gone

    channel = FailureChannel(GoneStore(), 1, "ppir/error/x/0", timeout_s=5.0)
    assert channel.first_failure() is None
    assert [channel.first_failure() for _ in range(20)] == [None] * 20
    assert channel.report("rank 1: lost rank 0") == "rank 1: lost rank 0"
    assert GoneStore.calls == 1 and channel.lost


LOST = """
import json, os, sys, time
os.environ.update(PPIR_LAUNCHER="1", TORCHELASTIC_ERROR_FILE=sys.argv[1])
from ppir.torch.failures import FailureChannel

class GoneStore:
    def check(self, keys):
        raise RuntimeError("Connection reset by peer")

channel = FailureChannel(GoneStore(), 1, "ppir/error/x/0", timeout_s=5.0)
settle = 1.0 if sys.argv[2] == "fails" else 0.2
channel.start_watchdog(interval_s=0.05, settle_s=settle)
if sys.argv[2] == "fails":  # the main thread fails meanwhile: it reports, not the watchdog
    time.sleep(0.3)  # the store has failed a poll: the watchdog is inside its settle time
    assert channel.lost
    channel.stop(wait=False)
    time.sleep(1.5)
    sys.exit(7)
time.sleep(30)  # a rank stuck in the model's code
"""


@pytest.mark.parametrize("main", ["stuck", "fails"])
def test_a_lost_store_ends_a_stuck_rank(tmp_path, main):
    """The store's host (node 0's launcher) went away while this rank hung in the model:
    nothing ended the rank (node 1 waited for ever).  The watchdog now ends it, exit 1, with a
    record saying so and where the main thread was, unless the main thread fails meanwhile."""
    err = tmp_path / "error.json"
    res = subprocess.run(
        [sys.executable, "-c", LOST, str(err), main], capture_output=True, text=True, timeout=20
    )
    if main == "fails":
        assert res.returncode == 7 and not err.exists(), res.stderr
        return
    assert res.returncode == 1, res.stderr
    rec = json.loads(err.read_text())["ppir"]
    assert rec["kind"] == "lost"  # after a failure it heard of, a consequence (outcome.py)
    assert rec["message"].startswith("rank 1: lost the rendezvous store at ")
    assert rec["where"].endswith(", in <module>")  # the sleep (a -c script shows no source)


def test_a_store_call_that_fails_while_its_host_listens_is_asked_again():
    """One failed call (a reset, a busy store) made the store 'lost' for good and, 1.5 s on,
    ended a healthy rank; the channel now asks the host with a plain socket and, while it
    listens, goes on through a new client; a closed port is a store gone."""
    import datetime

    dist = pytest.importorskip("torch.distributed")

    from ppir.torch.failures import FailureChannel

    host = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=datetime.timedelta(seconds=5))

    class Flaky:
        def check(self, keys):
            raise RuntimeError("Connection reset by peer")

    channel = FailureChannel(Flaky(), 1, "ppir/error/flaky/0", timeout_s=5.0)
    channel.address = ("127.0.0.1", host.port)
    assert channel.first_failure() is None and channel.lost
    assert not channel.gone() and not channel.lost
    host.set("ppir/error/flaky/0", "rank 0: boom")
    got = None
    for _ in range(3):  # as the watchdog polls: while the host listens, no failure is fatal
        got = channel.first_failure()
        if got is not None:
            break
        assert not channel.gone()
    assert got == "rank 0: boom"

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    channel.address, channel.lost = ("127.0.0.1", closed), True
    assert channel.gone(tries=2, gap_s=0.01)
