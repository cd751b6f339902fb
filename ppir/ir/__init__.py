"""The IR: per-rank programs (the serial and textual form) and the dependency graph built from
them.

* :mod:`ppir.ir.types` -- actions, groups, waits, overlapped steps, per-rank programs and the
  :class:`Schedule` that holds them (frozen dataclasses).
* :mod:`ppir.ir.deps` -- the semantics of ops: what each consumes and produces, what crosses a
  stage boundary and who is at the other end of each message (the only place it is written).
* :mod:`ppir.ir.printer` -- the literal ``.pps`` text and the JSON ``ppir.program/1`` forms.
* :mod:`ppir.ir.graph` -- the networkx dependency graph that passes and analyses read.
"""

from ppir.ir.types import (
    COMM_KINDS,
    COMPUTE_KINDS,
    Action,
    Group,
    Item,
    OpKind,
    Overlap,
    Reduce,
    Schedule,
    Span,
    Wait,
    is_comm_item,
    is_compute_item,
    item_actions,
    looped_placement,
    parse_item,
    placement_name,
    vshape_placement,
)

__all__ = [
    "COMM_KINDS",
    "COMPUTE_KINDS",
    "Action",
    "Group",
    "Item",
    "OpKind",
    "Overlap",
    "Reduce",
    "Schedule",
    "Span",
    "Wait",
    "is_comm_item",
    "is_compute_item",
    "item_actions",
    "looped_placement",
    "parse_item",
    "placement_name",
    "vshape_placement",
]
