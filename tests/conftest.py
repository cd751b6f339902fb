"""Shared test set-up: hypothesis profiles, golden files, helpers.

* ``HYPOTHESIS_PROFILE=ci`` (set by .ci/run) is derandomized with no deadline; ``dev`` is the
  default for local runs (random, no deadline either: no timing flakes on a shared machine).
* ``pytest --update-golden`` rewrites golden files instead of comparing with them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

GOLDEN_DIR = Path(__file__).parent / "golden"
ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden", action="store_true", help="rewrite golden files with the current output"
    )


@pytest.fixture
def golden(request):
    """``golden("sub/name.out", text)``: compare text with the golden file (or rewrite it)."""
    update = request.config.getoption("--update-golden")

    def check(rel: str, text: str) -> None:
        path = GOLDEN_DIR / rel
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        if not path.exists():  # a missing golden fails: it is written only when asked for
            pytest.fail(f"golden file {rel} is missing (run pytest --update-golden, then read it)")
        expected = path.read_text()
        assert text == expected, f"output differs from golden {rel} (pytest --update-golden)"

    return check


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """Run ``ppir`` in-process; returns (exit code, stdout, stderr)."""
    from ppir.cli import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def cli(capsys):
    """``cli("check", "1f1b", "-D", "P=2")`` -> (exit code, stdout, stderr), run in-process."""

    def run(*argv: str):
        return run_cli(list(argv), capsys)

    return run


@pytest.fixture
def one_rank_group():
    """A one-process gloo group (torch.distributed's default group) for the test's duration:
    for code that issues collectives, where one rank stands for the group."""
    torch = pytest.importorskip("torch")
    dist = torch.distributed
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()
