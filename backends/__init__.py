"""Backends: what ppir does with a verified, lowered schedule.

A backend is an object with ``name``, ``help``, ``add_arguments(argument_group)`` and
``run(schedule, args) -> int``; ``runs_deferred_groups = False`` asks ``ppir compile`` not to
apply the overlap-comms pass (default True).  Built-ins are listed in :data:`BUILTIN`;
plug-ins register ``name = "module:attribute"`` under the ``ppir.backends`` entry-point group.
Installed as ``ppir.backends`` (the top-level ``backends/`` folder); torch is imported only
inside the backends that need it, and only when they run.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from ..diagnostics import did_you_mean, error

BUILTIN = {
    "cost": "ppir.backends.cost:BACKEND",
    "cuda": "ppir.backends.cuda:BACKEND",
    "torch-csv": "ppir.backends.torch_csv:BACKEND",
}


def _registry() -> dict[str, str]:
    out = dict(BUILTIN)
    for ep in entry_points(group="ppir.backends"):
        out.setdefault(ep.name, ep.value)
    return out


def available_backends() -> list[str]:
    return sorted(_registry())


def get_backend(name: str):
    reg = _registry()
    if name not in reg:
        raise error(
            "unknown-backend",
            f"unknown backend '{name}'",
            hints=did_you_mean(name, reg) + [f"backends: {', '.join(sorted(reg))}"],
        )
    module, _, attr = reg[name].partition(":")
    return getattr(importlib.import_module(module), attr)
