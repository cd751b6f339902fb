"""ppir: a compiler for pipeline-parallel training schedules.

Write a schedule once in a .pps file, prove it safe, measure it, and run it::

    import ppir
    s = ppir.load("interleaved_1f1b", P=4, M=8, v=2)   # a built-in, a .pps or a torch CSV
    c = ppir.compile(s)                                 # lower, overlap, verify, time
    c.ok, c.step_time, c.program                        # what 'ppir compile' reports and runs
    ppir.estimate(c).bubble_fraction_of_ideal
    ppir.analyze(c).memory.worst.peak_activations
    g = ppir.graph(c.program)                           # the networkx dependency graph

Every function compiles the way the ``ppir`` command does (:func:`compile`), so the library and
the CLI report the same numbers.  torch is optional: everything here imports without it.
docs/api.md has the whole API with examples.

The names are imported on first use (PEP 562): ``import ppir`` alone imports neither lark nor
networkx, so that the ``ppir`` command starts at once and a Ctrl-C from its first moment is
its one-line ``ppir: interrupted``, not a traceback from the middle of an import.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING

__version__ = "0.1.0"

# Each public name -> the module that defines it.  The TYPE_CHECKING block below says the same
# for type checkers (tests/test_startup.py holds the two, and __all__, to one list).
_LAZY = {
    "PASSES": "ppir.passes",
    "Action": "ppir.ir",
    "Analysis": "ppir.analysis.analyze",
    "Compiled": "ppir.pipeline",
    "CostConfig": "ppir.analysis.config",
    "Diagnostic": "ppir.diagnostics",
    "Estimate": "ppir.analysis.estimate",
    "Footprint": "ppir.analysis.footprint",
    "Group": "ppir.ir",
    "LowerComms": "ppir.passes",
    "ModelShape": "ppir.analysis.models",
    "OpKind": "ppir.ir",
    "Overlap": "ppir.ir",
    "OverlapComms": "ppir.passes",
    "PpirError": "ppir.diagnostics",
    "Program": "ppir.api",
    "ProgramGraph": "ppir.ir.graph",
    "Report": "ppir.diagnostics",
    "Schedule": "ppir.ir",
    "Span": "ppir.ir",
    "Wait": "ppir.ir",
    "analyze": "ppir.api",
    "compile": "ppir.api",
    "estimate": "ppir.api",
    "from_json": "ppir.ir.printer",
    "graph": "ppir.api",
    "load": "ppir.api",
    "load_schedule": "ppir.frontend.loader",
    "load_text": "ppir.frontend.loader",
    "lower": "ppir.api",
    "make_config": "ppir.analysis.config",
    "to_json": "ppir.api",
    "to_pps": "ppir.api",
    "verify": "ppir.api",
}

if TYPE_CHECKING:
    from ppir.analysis.analyze import Analysis
    from ppir.analysis.config import CostConfig, make_config
    from ppir.analysis.estimate import Estimate
    from ppir.analysis.footprint import Footprint
    from ppir.analysis.models import ModelShape
    from ppir.api import Program as Program  # what the functions take (not in __all__)
    from ppir.api import (
        analyze,
        compile,
        estimate,
        graph,
        load,
        lower,
        to_json,
        to_pps,
        verify,
    )
    from ppir.diagnostics import Diagnostic, PpirError, Report
    from ppir.frontend.loader import load_schedule, load_text
    from ppir.ir import Action, Group, OpKind, Overlap, Schedule, Span, Wait
    from ppir.ir.graph import ProgramGraph
    from ppir.ir.printer import from_json
    from ppir.passes import PASSES, LowerComms, OverlapComms
    from ppir.pipeline import Compiled


def __getattr__(name: str):
    """A public name, imported from its module on first use (then an ordinary attribute)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ppir' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _Package(types.ModuleType):
    """The ``ppir`` module's type: the import system binds each subpackage it imports as an
    attribute of its parent, and ``ppir.verify`` (the package of checks) would then hide
    ``ppir.verify`` (the function) when it is imported before the function is first used."""

    def __setattr__(self, name: str, value) -> None:
        if name == "verify" and isinstance(value, types.ModuleType):
            return  # sys.modules["ppir.verify"] has the package; the attribute is the function
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = [
    "PASSES",
    "Action",
    "Analysis",
    "Compiled",
    "CostConfig",
    "Diagnostic",
    "Estimate",
    "Footprint",
    "Group",
    "LowerComms",
    "ModelShape",
    "OpKind",
    "Overlap",
    "OverlapComms",
    "PpirError",
    "ProgramGraph",
    "Report",
    "Schedule",
    "Span",
    "Wait",
    "__version__",
    "analyze",
    "compile",
    "estimate",
    "from_json",
    "graph",
    "load",
    "load_schedule",
    "load_text",
    "lower",
    "make_config",
    "to_json",
    "to_pps",
    "verify",
]
