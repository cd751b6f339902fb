"""Backends are plug-ins: objects found by name in the ``ppir.backends`` entry-point group.

ppir's own backends (``cost``, ``cuda``, ``torch-csv``) are registered there by ppir's
``pyproject.toml`` exactly like a third-party one, so nothing in the compiler imports a backend:
a backend is a leaf that receives a compiled program.

A backend is an object with ``name``, ``help``, ``add_arguments(argument_group)`` and
``run(compiled, args) -> int`` (``compiled`` is a :class:`ppir.pipeline.Compiled`);
``runs_deferred_groups = False`` asks for blocking groups (no overlap-comms; default True).
A package adds one with::

    [project.entry-points."ppir.backends"]
    mine = "my_package.module:BACKEND"
"""

from __future__ import annotations

from functools import lru_cache
from importlib.metadata import entry_points

from ppir.diagnostics import did_you_mean, error

GROUP = "ppir.backends"


@lru_cache(maxsize=1)
def _registry() -> dict:
    out = {}
    for ep in entry_points(group=GROUP):
        out.setdefault(ep.name, ep)
    return out


def available_backends() -> list[str]:
    """Names of the installed backends, sorted."""
    return sorted(_registry())


def get_backend(name: str):
    """The backend object registered as ``name``; a ppir error (exit 2) naming the installed
    ones when there is none."""
    reg = _registry()
    if name not in reg:
        hint = (
            [f"backends: {', '.join(sorted(reg))}"]
            if reg
            else ["no backend is registered: is ppir installed (pip install -e .)?"]
        )
        raise error(
            "unknown-backend", f"unknown backend '{name}'", hints=did_you_mean(name, reg) + hint
        )
    return reg[name].load()
