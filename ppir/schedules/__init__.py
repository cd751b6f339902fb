"""The built-in schedules, each a .pps file written in ppir's own language."""

from __future__ import annotations

from importlib import resources


def builtin_names() -> list[str]:
    """Names of the shipped schedules (file stems), sorted."""
    files = resources.files(__name__)
    return sorted(p.name[:-4] for p in files.iterdir() if p.name.endswith(".pps"))


def builtin_source(name: str) -> str:
    """The .pps text of a built-in schedule; KeyError when there is none by that name."""
    if name not in builtin_names():
        raise KeyError(name)
    return resources.files(__name__).joinpath(f"{name}.pps").read_text(encoding="utf-8")


def builtin_display_path(name: str) -> str:
    """The path diagnostics show for a built-in (stable across installs)."""
    return f"<builtin>/{name}.pps"
