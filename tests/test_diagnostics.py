"""Golden tests for diagnostics: every error kind renders file:line:col, the line, carets, hints.

Each case under tests/golden/errors/ is a .pps (or .csv + .run) file whose first line says how to
run it (``# RUN: ppir check {file} -D ...``); the expected stderr and exit status are in the
matching ``.err`` golden file.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "golden" / "errors"


def _cases():
    for p in sorted(CASES.iterdir()):
        if p.suffix in (".pps", ".csv"):
            yield p


def _run_line(path: Path) -> list[str]:
    src = path.with_suffix(".run") if path.suffix == ".csv" else path
    first = src.read_text().splitlines()[0]
    assert first.startswith("# RUN: ppir "), f"{src} lacks a '# RUN: ppir ...' line"
    rel = path.relative_to(ROOT).as_posix()
    return shlex.split(first[len("# RUN: ppir ") :].replace("{file}", rel))


@pytest.mark.parametrize("path", list(_cases()), ids=lambda p: p.stem)
def test_error_golden(path, cli, golden, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, out, err = cli(*_run_line(path))
    assert code == 2, f"expected exit 2 (unusable input), got {code}\n{err}"
    assert "Traceback" not in err
    assert err.startswith(("tests/golden/errors/", "ppir: error:")), err
    golden(f"errors/{path.stem}.err", f"exit {code}\n{err}")


def test_error_kinds_are_distinct(monkeypatch):
    """At least 12 distinct diagnostic kinds are covered by the corpus."""
    from ppir.cli.common import parse_defines
    from ppir.diagnostics import PpirError
    from ppir.frontend.loader import load_schedule

    monkeypatch.chdir(ROOT)
    kinds = set()
    for path in _cases():
        argv = _run_line(path)
        defines = [a for i, a in enumerate(argv) if i and argv[i - 1] == "-D"]
        max_ops = int(argv[argv.index("--max-ops") + 1]) if "--max-ops" in argv else 5_000_000
        try:
            load_schedule(argv[1], parse_defines(defines), max_ops=max_ops)
        except PpirError as e:
            kinds.add(e.kind)
        else:
            pytest.fail(f"{path.name} expanded without error")
    assert len(kinds) >= 12, sorted(kinds)


def test_rank_lists_read_as_the_verifier_writes_them():
    from ppir.diagnostics import rank_list

    assert rank_list([]) == "no rank"  # was an IndexError
    assert rank_list([2]) == "rank 2"
    assert rank_list([0, 1]) == "ranks 0 and 1"  # as 'ranks 1 and 2 wait for each other'
    assert rank_list([0, 1, 3]) == "ranks 0, 1 and 3"
    assert rank_list(range(12)) == "ranks 0, 1, 2, 3, 4, 5, 6, 7, ... (4 more)"
    assert rank_list(range(3), limit=2) == "ranks 0, 1, ... (1 more)"
