"""Packaging: the wheel carries the grammar, the backends, the built-in schedules, the license
and py.typed inside ppir; the extras hold what their users need and nothing more."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
DEV_TOOLS = {"ruff", "build", "playwright", "pytest-timeout"}

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(extra: str | None, seen: frozenset = frozenset()) -> dict[str, Requirement]:
    """The requirements of the core (``extra=None``) or of an extra, by normalized name, with
    references to ppir's own extras (``ppir[test]``) expanded."""
    project = _project()
    lines = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    out: dict[str, Requirement] = {}
    for line in lines:
        req = Requirement(line)
        if _norm(req.name) == "ppir":
            for sub in sorted(req.extras - seen):
                out.update(_requirements(sub, seen | {sub}))
        else:
            out[_norm(req.name)] = req
    return out


def _third_party_imports(*folders: str) -> dict[str, set[str]]:
    """Distribution name -> files importing it, over the .py files under ``folders``."""
    dists = importlib.metadata.packages_distributions()
    out: dict[str, set[str]] = {}
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    names = [node.module]
                else:
                    continue
                for top in {n.split(".")[0] for n in names}:
                    if top in sys.stdlib_module_names or top in ("ppir", "tomli"):
                        continue
                    for dist in dists.get(top, [top]):
                        out.setdefault(_norm(dist), set()).add(path.relative_to(ROOT).as_posix())
    return out


def test_the_test_extra_is_what_ppir_testing_needs_and_no_developer_tool():
    test = _requirements("test")
    assert set(test) == {"pytest", "hypothesis"}
    assert not DEV_TOOLS & set(test)
    needed = _third_party_imports("ppir/testing")
    assert set(needed) <= set(_requirements(None)) | set(test), needed
    assert {"pytest", "hypothesis"} <= set(needed)  # both are really used


def test_every_third_party_import_is_declared_in_the_right_place():
    core, torch, viz = _requirements(None), _requirements("torch"), _requirements("viz")
    used = _third_party_imports("ppir", "backends", "grammar")
    declared = set(core) | set(torch) | set(viz) | set(_requirements("test"))
    assert set(used) <= declared, {d: f for d, f in used.items() if d not in declared}
    assert set(torch) == {"torch"} and set(viz) == {"matplotlib"}
    assert {"lark", "networkx"} <= set(core) and not {"torch", "matplotlib"} & set(core)
    assert str(core["tomli"].marker) == 'python_version < "3.11"'


def test_the_dev_extra_installs_the_suite_and_the_tools():
    dev = set(_requirements("dev"))
    assert DEV_TOOLS <= dev
    for extra in ("torch", "viz", "test"):
        assert set(_requirements(extra)) <= dev, extra
    assert 'pip install -q -e ".[dev]"' in (ROOT / "Makefile").read_text()


def test_license_version_and_typing_marker():
    project = _project()
    assert project["license"] == "Apache-2.0"  # an SPDX expression, not the deprecated table
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text  # the full text, not a pointer to it
    assert "version" not in project and project["dynamic"] == ["version"]
    import ppir

    assert importlib.metadata.version("ppir") == ppir.__version__
    assert (ROOT / "ppir" / "py.typed").exists()


def test_editable_install_maps_top_level_folders():
    import importlib

    grammar = importlib.import_module("ppir.grammar")
    backends = importlib.import_module("ppir.backends")
    assert Path(grammar.__file__).parent == ROOT / "grammar"
    assert Path(backends.__file__).parent == ROOT / "backends"


def test_torch_is_not_imported_by_the_core():
    code = (
        "import sys, ppir, ppir.cli, ppir.ir.graph, ppir.backends; "
        "from ppir.frontend.loader import load_schedule; load_schedule('1f1b'); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.slow
def test_wheel_contains_grammar_backends_schedules_license_and_py_typed(tmp_path):
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-v",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        timeout=300,
        capture_output=True,
        text=True,
    )
    log = built.stdout + built.stderr
    assert "deprecated" not in log.lower(), log  # e.g. setuptools on a license table
    wheel = next(tmp_path.glob("ppir-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = [
        p.parent for d in ("ppir", "backends", "grammar") for p in (ROOT / d).rglob("__init__.py")
    ]
    assert len(packages) > 10
    for pkg in packages:  # every package of the tree ships, under the ppir namespace
        rel = pkg.relative_to(ROOT).as_posix()
        if not rel.startswith("ppir"):
            rel = "ppir/" + rel
        assert f"{rel}/__init__.py" in names, rel
    for required in [
        "ppir/grammar/pps.lark",
        "ppir/schedules/1f1b.pps",
        "ppir/schedules/zbv.pps",
        "ppir/viz/page.html",
        "ppir/passes/overlap.py",
        "ppir/py.typed",
    ]:
        assert required in names, required
    assert not any(n.startswith(("grammar/", "backends/")) for n in names)
    info = f"ppir-{importlib.metadata.version('ppir')}.dist-info"
    assert f"{info}/licenses/LICENSE" in names
    meta = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    assert "License-Expression: Apache-2.0" in meta
    assert 'Requires-Dist: tomli>=2.0; python_version < "3.11"' in meta
    entry = [n for n in names if n.endswith("entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry[0]).decode()
    assert "ppir = ppir.cli:main" in text
    assert "[pytest11]\nppir = ppir.testing.pytest_entry\n" in text
    for backend in ("cost = ppir.backends.cost:BACKEND", "cuda = ppir.backends.cuda:BACKEND"):
        assert backend in text, backend
