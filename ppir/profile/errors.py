"""The errors of ``ppir profile`` and how a failed rank's error reaches the parent.

A mistake in the request or the model that ppir can name in one line is a
:class:`ProfileError` (the CLI prints it without a traceback); a rank that failed otherwise
(an exception inside the user's model, with its traceback) ends the measurement with
:class:`ProfileFailed`, naming the earliest failure once.  A message or collective that a peer
never answers, or that breaks off, is the runtime's one-line
:class:`~ppir.torch.errors.CommError` (:func:`comm`), naming the peer as 'ppir launch' does.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path


class ProfileError(ValueError):
    """The request cannot be measured (bad sizes, a model module without the contract)."""


class OptimizerNotMeasured(UserWarning):
    """The model's optimizer could not be made or stepped in the profile, so the cost file has
    no optimizer state (whole memory stays in A); the message ends with the traceback."""

    def __init__(self, traceback_text: str):
        super().__init__(
            "the model's optimizer could not be made and stepped in the profile, so its state "
            "is not measured and the cost file keeps memory in A, not bytes:\n"
            + traceback_text.rstrip()
        )


class ProfileFailed(RuntimeError):
    """A rank of the measurement failed: the message names the root cause once (the earliest
    error a rank raised, with its traceback), or says that the ranks ran out of time."""


def failure(out: str, codes: list, stopped=()) -> Exception:
    """The root cause of a failed measurement, from the error files the ranks wrote
    (``{out}.error.R``): the earliest error; the ranks that failed after it are named as
    stopped by it (a lost connection to the failed rank, as a rule).  A rank's own exception
    comes with its traceback; a message or collective that timed out (a stuck peer: the rank
    that waited fails first) is the runtime's one line naming the peer, as 'ppir launch'
    prints it (:func:`comm`).  ``stopped``: the ranks the parent terminated (named so, not by
    the signal, where the parent's SIGTERM or SIGKILL ended them)."""
    errors = []
    for r in range(len(codes)):
        try:
            errors.append((json.loads(Path(f"{out}.error.{r}").read_text()), r))
        except (OSError, ValueError):
            continue

    def end(r: int, c: int) -> str:
        if r in stopped and c in (-signal.SIGTERM, -signal.SIGKILL):
            return "stopped"
        return "ok" if c == 0 else f"exit {c}" if c > 0 else f"signal {-c}"

    ends = ", ".join(f"rank {r}: {end(r, c)}" for r, c in enumerate(codes))
    if not errors:
        return ProfileFailed(f"ppir profile: ranks failed without a Python error ({ends})")
    first, r = min(errors, key=lambda e: e[0]["time"])
    if first["usage"]:  # a mistake ppir names in one line (a bad module, a bad batch)
        line = first["line"]  # the runtime's messages name the rank themselves
        return ProfileError(line if line.startswith(f"rank {r}: ") else f"rank {r}: {line}")
    if first.get("comm"):  # one line naming the rank and the peer, as 'ppir launch' prints it
        return ProfileFailed(f"ppir profile: failed: {first['line']}\nppir profile: {ends}")
    return ProfileFailed(
        f"ppir profile: rank {r} failed:\n{first['traceback'].rstrip()}\nppir profile: {ends}"
    )


def others(rank: int, world: int) -> tuple[int, ...]:
    """Every rank of ``world`` but ``rank``: the peers a collective of the profile waits for."""
    return tuple(r for r in range(world) if r != rank)


def comm(where: str, peers, fn, *args, timeout_s: float | None = None):
    """``fn(*args)``, a message or collective of the profile: torch.distributed's RuntimeError (a
    peer that timed out, a lost connection) raised as the runtime's
    :func:`~ppir.torch.errors.comm_error`, one line at ``where`` naming ``peers`` (the stuck
    rank, when it timed out) instead of gloo's message from the rank that waited."""
    from ppir.torch.errors import comm_error

    try:
        return fn(*args)
    except RuntimeError as e:
        raise comm_error(where, peers, e, timeout_s) from None


def usage(e: Exception) -> Exception:
    """``e``, or a :class:`ProfileError` with its message where it is one of the runtime's
    one-line errors about the model (:class:`~ppir.torch.errors.ModelError`: a loss that is
    not a scalar; :class:`~ppir.torch.errors.ShapeMismatch`: a stage output that cannot cross
    a boundary), which the runtime reports without a traceback too."""
    from ppir.torch.errors import MODEL_MISTAKES

    return ProfileError(str(e)) if isinstance(e, MODEL_MISTAKES) else e


def check_loss(loss, rank: int, stage: int, mb: int, step: int) -> None:
    """A :class:`ProfileError` when ``loss`` (of microbatch ``mb`` at the profile's ``step``)
    is NaN or infinite, named as the runtime names it
    (:func:`ppir.torch.model.nonfinite_loss`): such a run's times are no costs to write."""
    from ppir.torch.model import nonfinite_loss

    msg = nonfinite_loss([(mb, loss)], rank, stage, f"profile step {step}")
    if msg is not None:
        raise ProfileError(
            f"{msg}; a loss that is not finite cannot be profiled: stopping, no cost file written"
        )


def record_error(out: str, rank: int, e: Exception) -> None:
    """The rank's error for the parent (``{out}.error.R``; see :func:`failure`)."""
    from ppir.torch.errors import CommError
    from ppir.tracebacks import user_traceback

    one_line = isinstance(e, (ProfileError, CommError))
    record = {
        "time": time.time(),
        "usage": isinstance(e, ProfileError),
        "comm": isinstance(e, CommError),
        "line": str(e) if one_line else f"{type(e).__name__}: {e}",
        "traceback": user_traceback(e),
    }
    Path(f"{out}.error.{rank}").write_text(json.dumps(record))
