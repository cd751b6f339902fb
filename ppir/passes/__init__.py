"""Passes over the IR.  A pass is a small frozen dataclass with a kebab-case ``name`` and one
``apply(schedule) -> schedule``; it leaves the IR valid.  :data:`PASSES` maps names to classes.
"""

from ppir.passes.lower_comms import LowerComms
from ppir.passes.overlap import OverlapComms

PASSES = {LowerComms.name: LowerComms, OverlapComms.name: OverlapComms}

__all__ = ["LowerComms", "OverlapComms", "PASSES"]
