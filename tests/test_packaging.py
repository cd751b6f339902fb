"""The wheel carries the grammar, the backends and the built-in schedules inside ppir."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
def test_wheel_contains_grammar_backends_and_schedules(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        timeout=300,
        capture_output=True,
    )
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
    ]:
        assert required in names, required
    assert not any(n.startswith(("grammar/", "backends/")) for n in names)
    entry = [n for n in names if n.endswith("entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry[0]).decode()
    assert "ppir = ppir.cli:main" in text
    for backend in ("cost = ppir.backends.cost:BACKEND", "cuda = ppir.backends.cuda:BACKEND"):
        assert backend in text, backend
