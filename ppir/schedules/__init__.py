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


def builtin_file(name: str) -> str:
    """The path of built-in ``name``'s .pps file as installed, for a command line that must
    name the built-in where the working directory holds a file called ``name`` (which a
    SCHEDULE argument reads first); KeyError when there is none by that name."""
    if name not in builtin_names():
        raise KeyError(name)
    return str(resources.files(__name__).joinpath(f"{name}.pps"))
