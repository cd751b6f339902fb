"""The root cause ``ppir launch`` names among its ranks' ends, and the one-line summary of
every rank (backends/cuda/outcome.py), on hand-made ends: the order of its rules, and how a
rank that had recorded its failure before the launcher stopped it is told."""

from __future__ import annotations

import signal

import pytest
from ppir.backends.cuda.outcome import RankEnd, ended_with_0, root_cause, summary

TERM, KILL = -signal.SIGTERM, -signal.SIGKILL


def own(rank, message, time, code=1, traceback=None):
    rec = {"kind": "own", "message": message, "time": time, "traceback": traceback}
    return RankEnd(rank, code, rec)


def comm(rank, message, time):
    return RankEnd(rank, 1, {"kind": "comm", "message": message, "time": time})


def test_the_earliest_own_error_is_the_cause_before_any_death_or_lost_peer():
    ends = [
        comm(0, "rank 0: lost the connection to rank 2", 1.0),
        own(1, "rank 1: ValueError: late", 5.0),
        own(2, "rank 2: ValueError: early", 2.0, traceback="Traceback ..."),
        RankEnd(3, KILL, None),
    ]
    cause = root_cause(ends)
    assert (cause.message, cause.traceback, cause.rank) == (
        "rank 2: ValueError: early",
        "Traceback ...",
        2,
    )
    assert summary(ends, cause) == (
        "rank 0: lost its peers (exit code 1); rank 1: failed too (exit code 1); "
        "rank 2: failed (exit code 1); rank 3: died (killed by signal 9 (SIGKILL))"
    )


def test_a_rank_that_recorded_its_failure_and_was_then_terminated_was_stopped_by_the_launcher():
    """A failed --verify-grads: every rank records the same verdict; the launcher stops a rank
    still leaving once another has exited.  It failed too; SIGTERM is not how it failed."""
    ends = [own(0, "rank 0: --verify-grads: ...", 1.0, TERM), own(1, "rank 1: ...", 1.5)]
    cause = root_cause(ends)
    assert cause.rank == 0
    assert summary(ends, cause) == (
        "rank 0: failed (then stopped by the launcher); rank 1: failed too (exit code 1)"
    )
    ends = [own(0, "rank 0: ...", 1.0), own(1, "rank 1: ...", 1.5, TERM)]
    assert summary(ends, root_cause(ends)) == (
        "rank 0: failed (exit code 1); rank 1: failed too (then stopped by the launcher)"
    )


def test_a_death_without_exception_comes_before_a_lost_peer():
    ends = [comm(0, "rank 0: lost the connection to rank 1", 1.0), RankEnd(1, -11, None)]
    cause = root_cause(ends)
    assert cause.message == (
        "rank 1 died without a Python exception (killed by signal 11 (SIGSEGV))"
    )
    assert summary(ends, cause) == (
        "rank 0: lost its peers (exit code 1); rank 1: failed (killed by signal 11 (SIGSEGV))"
    )
    assert root_cause([RankEnd(2, 3, None)]).message == (
        "rank 2 died without a Python exception (exit code 3)"
    )
    # exit code 1 without a record: an exception raised before ppir's runtime held the rank
    # (a worker script's failed import); it was said to be a death without an exception
    ends = [RankEnd(0, 1, None), RankEnd(1, 1, None), RankEnd(2, -9, None)]
    assert root_cause(ends).message == (
        "ranks 0 and 1 ended with exit code 1 and recorded no error (how Python ends on an "
        "uncaught exception: the traceback is in the output above); rank 2 died without a "
        "Python exception (killed by signal 9 (SIGKILL))"
    )
    # and the summary says rank 1 failed as rank 0 did (it said 'died (exit code 1)')
    assert summary(ends, root_cause(ends)) == (
        "rank 0: failed (exit code 1); rank 1: failed too (exit code 1); "
        "rank 2: died (killed by signal 9 (SIGKILL))"
    )


def test_the_earliest_lost_peer_then_a_quoted_failure_then_outside_sigterms():
    ends = [comm(0, "rank 0: no answer from rank 3", 4.0), comm(1, "rank 1: no answer", 2.0)]
    assert root_cause(ends).message == "rank 1: no answer"
    quoted = RankEnd(0, 1, {"kind": "secondary", "first": "rank 5: ValueError: x", "time": 1.0})
    cause = root_cause([quoted, RankEnd(1, TERM, None)])
    assert cause.message == "rank 5: ValueError: x (reported to rank 0)" and cause.rank is None
    assert summary([quoted, RankEnd(1, TERM, None)], cause) == "rank 0: stopped; rank 1: stopped"
    stopped = [RankEnd(2, TERM, None), RankEnd(0, TERM, None)]
    assert root_cause(stopped).message == (
        "ranks 0 and 2 terminated by SIGTERM from outside the launcher"
    )
    assert root_cause([]) is None


def test_a_rank_that_ended_with_0_while_its_peer_ran_is_the_cause():
    """A rank whose model code calls os._exit(0) mid-run: torch's agent lists only the ranks
    that ended non-zero, so the report said 'rank 0, ...: lost the connection to rank 1 (did
    it fail?)' and 'rank 0: failed (exit code 1)', and rank 1 was named nowhere."""
    lost = "rank 0, instruction #11 (wait[0RECV_B1]): lost the connection to rank 1 (did it fail?)"
    ends = [RankEnd(0, 1, {"kind": "comm", "message": lost, "time": 1.0, "peers": [1]})]
    ends += [RankEnd(r, 0, None) for r in ended_with_0({0: 0}, 2)]
    cause = root_cause(ends)
    assert cause.message == f"rank 1 ended with exit code 0 while rank 0 was still running; {lost}"
    assert (
        summary(ends, cause)
        == "rank 0: lost its peers (exit code 1); rank 1: left early (exit code 0)"
    )
    # a lost peer that names no rank: every rank of the node that ended with 0
    ends = [comm(2, "rank 2: comparing make_batch(1): lost the connection to its peers", 1.0)]
    ends += [RankEnd(r, 0, None) for r in ended_with_0({2: 0}, 3)]
    assert root_cause(ends).message.startswith(
        "ranks 3 and 4 ended with exit code 0 while rank 2 was still running; rank 2: comparing"
    )


def test_a_rank_that_ended_with_0_is_not_blamed_for_what_it_did_not_cause():
    # the lost peer is another rank: the one that ended with 0 is listed, not the cause
    lost = {"kind": "comm", "message": "rank 0: no answer from rank 2", "time": 1.0, "peers": [2]}
    ends = [RankEnd(0, 1, lost), RankEnd(2, TERM, None), RankEnd(1, 0, None)]
    cause = root_cause(ends)
    assert cause.message == "rank 0: no answer from rank 2"
    assert summary(ends, cause) == (
        "rank 0: failed (exit code 1); rank 1: ended (exit code 0); rank 2: stopped"
    )
    # an exception is the cause before any rank that ended with 0
    ends = [own(1, "rank 1: ValueError: x", 1.0), RankEnd(0, 0, None)]
    assert root_cause(ends).message == "rank 1: ValueError: x"
    assert summary(ends, root_cause(ends)) == (
        "rank 0: ended (exit code 0); rank 1: failed (exit code 1)"
    )


def test_the_ranks_that_ended_with_0_are_this_nodes_ranks_the_agent_left_out():
    assert ended_with_0({0: 0, 1: 1}, 2) == []
    assert ended_with_0({5: 1}, 4) == [4, 6, 7]  # node 1 of 4 processes each: ranks 4..7


def test_the_cause_is_the_users_mistake_only_when_the_earliest_own_error_says_so():
    """A rank's record carries ``usage`` for a model that breaks the runtime's contract
    (ppir launch then exits 2); a later rank's such error does not make the first one so."""
    mistake = own(1, "rank 1: model 'm.py' lacks build_stage", 1.0)
    mistake.record["usage"] = True
    assert root_cause([mistake, own(0, "rank 0: ValueError: x", 2.0)]).usage
    assert not root_cause([mistake, own(0, "rank 0: ValueError: x", 0.5)]).usage
    assert not root_cause([own(0, "rank 0: ValueError: x", 0.5)]).usage  # no field: not


# faulthandler's dump of a rank the launcher stopped with SIGTERM (ppir.torch.failures)
DUMP = """Thread 0x00007f45c5fff6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 331 in wait
  File "/x/ppir/torch/failures.py", line 150 in watch

Current thread 0x00007f45d4a1cb80 (most recent call first):
  File "/home/u/model.py", line 97 in forward
  File "/x/ppir/torch/executor.py", line 215 in _forward
  File "/x/ppir/run.py", line 20 in <module>
  File "<frozen runpy>", line 88 in _run_code
  File "<frozen runpy>", line 198 in _run_module_as_main
"""


def test_a_timeout_shows_where_the_peer_it_names_was_when_stopped():
    """A rank stuck in the model (a sleep) was only 'stopped' in the summary; its peer's
    timeout now shows its stack: the watchdog's record ('where') or, when the launcher's
    SIGTERM came first, faulthandler's dump (main thread, most recent call last)."""
    rec = {"kind": "comm", "message": "rank 0, instruction #7 (wait[0RECV_B0]): no answer "
           "from rank 1 within the 4 s timeout (is it stuck?)", "time": 1.0, "peers": [1],
           "timeout": True}  # fmt: skip
    cause = root_cause([RankEnd(0, 1, rec), RankEnd(1, TERM, None, DUMP), RankEnd(2, TERM, None)])
    assert cause.rank == 0 and cause.message == rec["message"]
    assert cause.traceback == (
        "rank 1 was here when it stopped (most recent call last):\n"
        '  File "/x/ppir/run.py", line 20 in <module>\n'
        '  File "/x/ppir/torch/executor.py", line 215 in _forward\n'
        '  File "/home/u/model.py", line 97 in forward'
    )
    where = '  File "/home/u/model.py", line 97, in forward\n    time.sleep(1000)'
    secondary = {"kind": "secondary", "first": rec["message"], "time": 1.1, "where": where}
    cause = root_cause([RankEnd(0, 1, rec), RankEnd(1, 1, secondary)])
    assert cause.traceback.splitlines()[1:] == where.splitlines()
    assert root_cause([RankEnd(0, 1, rec), RankEnd(1, TERM, None)]).traceback is None


@pytest.mark.parametrize(
    "line, runpy",
    [
        ('  File "<frozen runpy>", line 88 in _run_code', True),  # Python 3.11+
        ('  File "/usr/lib/python3.10/runpy.py", line 86, in _run_code', True),  # 3.10
        ('  File "/usr/lib/python3.10/runpy.py", line 196 in _run_module_as_main', True),
        ('  File "/work/myrunpy.py", line 3, in forward', False),
        ('  File "/work/model.py", line 3, in forward', False),
    ],
)
def test_runpy_frames_are_left_out_on_every_python(line, runpy):
    """A rank's stack leaves out python -m's runpy frames: the filter matched only 3.11's
    frozen module, so on 3.10 (which ppir supports) they showed (review)."""
    from ppir.torch.stacks import runpy_frame

    assert runpy_frame(line) is runpy
