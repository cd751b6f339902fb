"""The property-test example works in a user's own repository: copied into an empty directory
outside this one and run with a plain ``pytest`` (none of ppir's conftest, hypothesis' default
settings), and still under a profile whose deadline every example would exceed, since
``property_test`` and the example's hand-written ``@given`` test turn the deadline off."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = ("test_my_schedule.py", "my_schedule.pps", "bad_schedule.pps")
TIGHT = """\
from hypothesis import settings

settings.register_profile("tight", deadline=1)  # 1 ms: every example of a check exceeds it
settings.load_profile("tight")
"""


def _fresh_project(tmp_path: Path, conftest: str | None) -> Path:
    project = tmp_path / "user_repo"
    (project / "tests").mkdir(parents=True)
    for name in FILES:
        shutil.copy(ROOT / "examples" / name, project / "tests" / name)
    if conftest:
        (project / "tests" / "conftest.py").write_text(conftest)
    assert ROOT not in project.resolve().parents
    return project


@pytest.mark.parametrize("conftest", [None, TIGHT], ids=["default-settings", "tight-deadline"])
def test_the_example_passes_in_a_fresh_project(tmp_path, conftest):
    project = _fresh_project(tmp_path, conftest)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HYPOTHESIS", "PYTEST"))}
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " 3 passed" in r.stdout and "DeadlineExceeded" not in r.stdout
    assert f"rootdir: {project}" in r.stdout  # not this repository's configuration


def test_property_test_sets_no_deadline_whatever_the_profile():
    from hypothesis import settings

    from ppir.testing import property_test

    settings.register_profile("tight-here", deadline=1)
    settings.load_profile("tight-here")
    try:
        test = property_test("1f1b", over={"P": "2..3", "M": "P..2P"}, examples=2)
        assert test._hypothesis_internal_use_settings.deadline is None
        test()
    finally:
        settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
