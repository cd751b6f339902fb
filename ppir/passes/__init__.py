"""Passes over the IR.  A pass is a small frozen dataclass with a kebab-case ``name`` and one
``apply(schedule) -> schedule``; its options are its fields.  :data:`PASSES` is the registry
the pass driver (:mod:`.driver`, ``-p lower-comms{strategy=eager},overlap-comms``) reads; the
driver verifies the program after each pass.
"""

from ppir.passes.forward_only import ForwardOnly
from ppir.passes.lower_comms import LowerComms
from ppir.passes.overlap import OverlapComms
from ppir.passes.reduce_grads import PlaceReduce

PASSES = {p.name: p for p in (ForwardOnly, LowerComms, OverlapComms, PlaceReduce)}

__all__ = ["ForwardOnly", "LowerComms", "OverlapComms", "PASSES", "PlaceReduce"]
