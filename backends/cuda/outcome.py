"""What went wrong in a launch: the root cause among the ranks' ends (no torch needed).

:func:`root_cause` reads one :class:`RankEnd` per rank that ended non-zero (its exit code and
the ``ppir`` record of its torchelastic error file, see :mod:`ppir.torch.failures`) and picks,
in this order:

1. the earliest rank's own error (an exception; the runtime's own error, or the user's code
   with its traceback); :attr:`Cause.usage` when it says the model breaks the runtime's
   contract (a missing function, a stage output of the wrong shape), which ``ppir launch``
   ends with exit code 2 like any other mistake in its input;
2. a rank that died without a Python exception: a signal other than the launcher's SIGTERM
   (SIGKILL, SIGSEGV, ...) or an exit code without a record (``os._exit``); exit code 1
   without a record is said to be Python's for an exception nothing caught (the rank's output
   holds its traceback);
3. the earliest communication failure (a peer that timed out or went away) -- the peer it names
   is the one that hung; when that peer (or, if it names none, any rank of this node) ended
   with exit code 0, the cause is that rank leaving while this one still ran (``ppir.run``
   ends a rank with 0 only after its closing barrier: the model's code left, ``os._exit(0)``);
   else the named peers' stacks when they stopped (``where``) follow as its traceback;
4. the first failure the stopping ranks quote (recorded by a rank on another node), with where
   the earliest of them was when it stopped;
5. a rank that lost the rendezvous store (node 0's launcher went away) and says where it was;
6. ranks terminated by SIGTERM, when nothing else explains the failure.

Everything else is a consequence: ranks stopped by the launcher, or stopping because of the
first failure.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from ppir.diagnostics import rank_list
from ppir.torch.stacks import dump_frames


@dataclass
class RankEnd:
    rank: int
    exitcode: int
    record: dict | None  # the error file's "ppir" record, if the rank wrote one
    stack: str | None = None  # faulthandler's dump when the launcher stopped it (SIGTERM)

    @property
    def kind(self) -> str:
        if self.record:
            return self.record.get("kind", "own")
        if self.exitcode == 0:  # torch's agent lists only the others: see ended_with_0
            return "exited"
        if self.exitcode == -signal.SIGTERM:
            return "stopped"
        return "died"

    def how(self) -> str:
        """How the process ended: ``exit code 1``, ``killed by signal 9 (SIGKILL)``; a rank
        that had recorded its failure and was then terminated was stopped by the launcher,
        which stops every rank once one has failed."""
        if self.record and self.exitcode == -signal.SIGTERM:
            return "then stopped by the launcher"
        if self.exitcode < 0:
            try:
                name = signal.Signals(-self.exitcode).name
            except ValueError:
                name = "unknown signal"
            return f"killed by signal {-self.exitcode} ({name})"
        return f"exit code {self.exitcode}"


@dataclass
class Cause:
    message: str  # one line naming the rank and the cause
    traceback: str | None = None
    rank: int | None = None
    left: tuple[int, ...] = ()  # ranks that ended with exit code 0 while others still ran
    usage: bool = False  # the model breaks the runtime's contract: the user's mistake (exit 2)


def ended_with_0(failed: dict[int, int], nproc_per_node: int) -> list[int]:
    """This node's ranks that torch's agent does not list among a failed run's ends
    (``failed``: global rank -> local rank of those it lists): they ended with exit code 0."""
    base = next(iter(g - loc for g, loc in failed.items()), 0)
    return [r for r in range(base, base + nproc_per_node) if r not in failed]


def root_cause(ends: list[RankEnd]) -> Cause | None:
    """The cause of a failed launch (see the module docstring); None when nothing failed."""
    by_kind: dict[str, list[RankEnd]] = {}
    for e in ends:
        by_kind.setdefault(e.kind, []).append(e)

    def earliest(kind: str) -> RankEnd:
        return min(by_kind[kind], key=lambda e: e.record.get("time", 0.0))

    if "own" in by_kind:
        e = earliest("own")
        usage = bool(e.record.get("usage"))
        return Cause(e.record["message"], e.record.get("traceback"), e.rank, usage=usage)
    if "died" in by_kind:
        died = sorted(by_kind["died"], key=lambda e: e.rank)
        text = _deaths(died)
        return Cause(text, None, died[0].rank)
    if "comm" in by_kind:
        e = earliest("comm")
        peers = e.record.get("peers") or ()
        left = tuple(
            sorted(x.rank for x in by_kind.get("exited", ()) if x.rank in peers or not peers)
        )
        if left:
            return Cause(
                f"{rank_list(left)} ended with exit code 0 while rank {e.rank} was still "
                f"running; {e.record['message']}",
                None,
                None,
                left,
            )
        return Cause(e.record["message"], _where_stopped(ends, peers), e.rank)
    if "secondary" in by_kind:  # where this node's reporting rank was stopped, e.g. stuck
        e = earliest("secondary")  # in the model while a peer on another node timed out on it
        first = f"{e.record.get('first')} (reported to rank {e.rank})"
        return Cause(first, _where_stopped(ends, {e.rank}), None)
    if "lost" in by_kind:  # after any failure it heard of: losing the store is a consequence
        e = earliest("lost")
        return Cause(e.record["message"], _where_stopped(ends, {e.rank}), e.rank)
    if "stopped" in by_kind:
        ranks = rank_list(sorted(e.rank for e in by_kind["stopped"]))
        return Cause(f"{ranks} terminated by SIGTERM from outside the launcher")
    return None


def _where_stopped(ends: list[RankEnd], peers) -> str | None:
    """Where the peers that a communication failure names were when they stopped (their
    watchdog's record of their main thread): a rank stuck in the user's code shows it."""
    out = []
    for e in sorted(ends, key=lambda e: e.rank):
        where = None
        if e.rank in peers:
            where = (e.record or {}).get("where") or "\n".join(dump_frames(e.stack))
        if where:
            out += [f"rank {e.rank} was here when it stopped (most recent call last):", where]
    return "\n".join(out) or None


def _deaths(died: list[RankEnd]) -> str:
    """How the ranks without a record ended (``died``, in rank order): exit code 1 is how
    Python ends on an exception that nothing caught (one raised before ppir's runtime held the
    rank, at import say); any other code or a signal is a death without a Python exception."""
    parts = [
        (e.rank, f"rank {e.rank} died without a Python exception ({e.how()})")
        for e in died
        if e.exitcode != 1
    ]
    if ones := [e.rank for e in died if e.exitcode == 1]:
        parts.append(
            (
                ones[0],
                f"{rank_list(ones)} ended with exit code 1 and recorded no error (how Python "
                "ends on an uncaught exception: the traceback is in the output above)",
            )
        )
    return "; ".join(text for _, text in sorted(parts))


def summary(ends: list[RankEnd], cause: Cause | None) -> str:
    """``rank 0: stopped (after rank 1's failure); rank 1: failed (exit code 1)``."""
    parts = []
    for e in sorted(ends, key=lambda e: e.rank):
        if e.kind == "exited":
            early = cause is not None and e.rank in cause.left
            parts.append(f"rank {e.rank}: {'left early' if early else 'ended'} ({e.how()})")
        elif cause is not None and e.rank == cause.rank:
            parts.append(f"rank {e.rank}: failed ({e.how()})")
        elif e.kind in ("stopped", "secondary", "lost"):
            parts.append(f"rank {e.rank}: stopped")
        else:
            what = {"own": "failed too", "comm": "lost its peers", "died": "died"}[e.kind]
            if e.kind == "died" and e.exitcode == 1:  # Python's end on an uncaught exception
                what = "failed too"
            parts.append(f"rank {e.rank}: {what} ({e.how()})")
    return "; ".join(parts)
