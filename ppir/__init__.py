"""ppir: a compiler for pipeline-parallel training schedules.

Write a schedule once in a .pps file, prove it safe, measure it, and run it::

    from ppir import load_schedule, lower
    s = lower(load_schedule("interleaved_1f1b", {"P": 4, "M": 8, "v": 2}))

torch is optional: parsing, the IR, passes and the estimator import without it.
"""

from ppir.diagnostics import Diagnostic, PpirError
from ppir.frontend.loader import load_schedule, load_text
from ppir.ir import Action, Group, OpKind, Schedule
from ppir.passes import LowerComms

__version__ = "0.1.0"


def lower(schedule: Schedule, strategy: str = "lockstep") -> Schedule:
    """Insert communication (the lower-comms pass)."""
    return LowerComms(strategy).apply(schedule)


__all__ = [
    "Action",
    "Diagnostic",
    "Group",
    "OpKind",
    "PpirError",
    "Schedule",
    "load_schedule",
    "load_text",
    "lower",
    "__version__",
]
