"""The runtime's own errors: each one is a user-facing message (no traceback), naming the rank."""

from __future__ import annotations

import os
import re

from ppir.diagnostics import rank_list


class RuntimeFailure(RuntimeError):
    """Base of the runtime's errors; the message is complete and names the rank."""


class ShapeMismatch(RuntimeFailure):
    """A tensor disagrees with the plan's shape/dtype metadata."""


class ModelError(RuntimeFailure, ValueError):
    """The model (module file, stages, loss) is missing something or returned something
    unusable."""


MODEL_MISTAKES = (ModelError, ShapeMismatch)
"""The runtime's errors that say the model breaks its contract: the user's mistake in the
input, which ``ppir launch`` and ``ppir profile`` end with exit code 2."""


class NonFiniteLoss(RuntimeFailure):
    """The loss of a microbatch is NaN or infinite."""


class SetupError(RuntimeFailure):
    """The process group, mesh or plan does not fit the processes that run it."""


class CommError(RuntimeFailure):
    """Communication with other ranks failed: ``peers`` (global ranks) timed out or went away.

    ``timeout`` tells a timeout from a lost connection."""

    def __init__(self, message: str, peers: tuple[int, ...] = (), timeout: bool = False):
        super().__init__(message)
        self.peers, self.timeout = tuple(peers), timeout


TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def not_launched(script: str | None = None) -> SetupError | None:
    """The error for a process that no launcher started (torchrun's variables unset), or None:
    ``python -m ppir.run`` prints it as a usage error (exit 2) before it imports torch;
    :func:`ppir.torch.procgroup.init` raises it for the user's own ``script`` (its path), which
    'ppir launch' and ``-m ppir.run`` do not start."""
    missing = [k for k in TORCHRUN_ENV if k not in os.environ]
    if not missing:
        return None
    if script is not None:
        return SetupError(
            f"{', '.join(missing)} not set: ppir.torch.init() joins the processes torchrun "
            f"starts: run 'torchrun --nproc-per-node N {script}' (or initialise "
            "torch.distributed yourself, without ppir.torch.init)"
        )
    return SetupError(
        f"{', '.join(missing)} not set: start the ranks through 'ppir launch' or torchrun "
        "('torchrun --nproc-per-node N -m ppir.run PLAN --module MODULE')"
    )


SHORT_TIMEOUT_S = 2.0
_TEXT_CHARS = 160  # of torch's message, after ppir's own words


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (torch's C++ stack follows it), or its type's name
    when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def comm_error(where: str, peers, exc: BaseException, timeout_s: float | None) -> CommError:
    """A :class:`CommError` for ``exc`` raised by torch.distributed at ``where``: one line,
    without torch's C++ stack."""
    text = first_line(exc)
    text = re.sub(r"^\[[^\]]*\]\s*", "", text)  # torch's "[path/to/file.cc:123] " prefix
    low = text.lower()
    timeout = "timed out" in low or "timeout" in low
    who = rank_list(peers) if peers else "its peers"
    if timeout:
        limit = f" within the {timeout_s:g} s timeout" if timeout_s else ""
        # below SHORT_TIMEOUT_S an ordinary step, start-up or first compile may be the cause
        why = (
            "is it stuck, or is the timeout too short?"
            if timeout_s and timeout_s < SHORT_TIMEOUT_S
            else "is it stuck?"
        )
        msg = f"{where}: no answer from {who}{limit} ({why})"
    else:
        msg = f"{where}: lost the connection to {who} (did it fail?)"
    if len(text) > _TEXT_CHARS:  # cut at a word, not inside one ('Check the logs of the re')
        text = text[:_TEXT_CHARS].rsplit(" ", 1)[0].rstrip(",;:") + " ..."
    return CommError(f"{msg}: {text}", peers, timeout)
