"""Faster ``__init__`` methods for :class:`ppir.ir.Group` and :class:`ppir.ir.Wait` (the passes
make one of each per communication group), installed by :mod:`ppir.ir.types`.

A frozen dataclass's generated ``__init__`` goes through ``object.__setattr__`` per field and
then calls ``__post_init__``; these set the slots through their descriptors (as
``_fast_action_init`` does for Actions) and accept a tuple of Actions (communication ones, for
a Group) at once.  Anything else goes through the class's own ``__post_init__``, which
converts it or raises just as it always has: the instances and the errors are the same.
"""

from __future__ import annotations


def install(group: type, wait: type, action: type, comm_kinds: frozenset) -> None:
    """Replace ``group.__init__`` and ``wait.__init__`` (see the module docstring)."""
    ga, gs, gd = (group.__dict__[n].__set__ for n in ("actions", "span", "deferred"))
    wa, ws = (wait.__dict__[n].__set__ for n in ("actions", "span"))
    group_checks, wait_checks = group.__post_init__, wait.__post_init__

    def group_init(self, actions: tuple, span=None, deferred: bool = False) -> None:
        ga(self, actions)
        gs(self, span)
        gd(self, deferred)
        if actions.__class__ is not tuple:
            group_checks(self)
            return
        for a in actions:
            if a.__class__ is not action or a.kind not in comm_kinds:
                group_checks(self)
                return

    def wait_init(self, actions: tuple, span=None) -> None:
        wa(self, actions)
        ws(self, span)
        if actions.__class__ is not tuple:
            wait_checks(self)
            return
        for a in actions:
            if a.__class__ is not action:
                wait_checks(self)
                return

    for new, old in ((group_init, group.__init__), (wait_init, wait.__init__)):
        new.__name__, new.__qualname__, new.__doc__ = old.__name__, old.__qualname__, old.__doc__
    group.__init__ = group_init
    wait.__init__ = wait_init
