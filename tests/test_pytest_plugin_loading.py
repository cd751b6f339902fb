"""The pytest plugin loads once however a user names it while ppir's ``pytest11`` entry point is
installed, and ``-p no:ppir`` still turns it off.

pytest registers a module loaded from an entry point under the entry point's name, and a module
named by ``-p``, ``pytest_plugins`` or ``PYTEST_PLUGINS`` under its module path; the same module
under two names is "Plugin already registered under a different name".  Each run here is a fresh
pytest in an empty directory with a ppir dist-info written from this checkout's pyproject.toml
ahead of any ppir metadata the environment holds (an editable install keeps the entry points of
its last install), so the entry points under test are the ones pyproject.toml declares."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ppir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = "ppir.testing.pytest_plugin"
USER_TEST = """\
def test_fixture(schedule_ok):
    assert schedule_ok("gpipe", P=2, M=2).ok
"""
CONFTEST = f"pytest_plugins = [{PLUGIN!r}]\n"


def _ppir_metadata(site: Path) -> None:
    """A ppir dist-info with the entry points this checkout's pyproject.toml declares."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    info = site / f"ppir-{ppir.__version__}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: ppir\nVersion: {ppir.__version__}\n"
    )
    groups = {"console_scripts": project["scripts"], **project["entry-points"]}
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in eps.items()) + "\n"
            for group, eps in groups.items()
        )
    )


def _pytest(tmp_path: Path, args: list[str], env: dict[str, str], conftest: str | None):
    site, project = tmp_path / "site", tmp_path / "project"
    _ppir_metadata(site)
    project.mkdir()
    (project / "test_user.py").write_text(USER_TEST)
    if conftest:
        (project / "conftest.py").write_text(conftest)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HYPOTHESIS", "PYTEST"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=project,
        env={**clean, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", **env},
        capture_output=True,
        text=True,
        timeout=240,
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "args, env, conftest",
    [
        ([], {}, None),
        (["-p", PLUGIN], {}, None),
        ([], {}, CONFTEST),
        ([], {"PYTEST_PLUGINS": PLUGIN}, None),
        (["-p", "ppir"], {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}, None),
    ],
    ids=[
        "autoload",
        "-p-module",
        "conftest",
        "PYTEST_PLUGINS",
        "no-autoload-p-ppir",
    ],
)
def test_every_way_of_loading_the_plugin_registers_it_once(tmp_path, args, env, conftest):
    code, out = _pytest(tmp_path, [*args, "--ppir-examples", "3"], env, conftest)
    assert code == 0 and "1 passed" in out, out
    assert "already registered" not in out
    assert f"ppir {ppir.__version__}: 3 examples per schedule property test" in out


@pytest.mark.parametrize("name", ["ppir", PLUGIN])
def test_p_no_turns_the_installed_plugin_off(tmp_path, name):
    code, out = _pytest(tmp_path, ["-p", f"no:{name}"], {}, None)
    assert code == 1 and "fixture 'schedule_ok' not found" in out, out
