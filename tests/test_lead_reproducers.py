"""Issue 19's reproducers whose fix is in the verifier, the lowering and the pipeline (the
lead's files): ``check`` accepts exactly what ``compile`` and ``launch`` run, no input hangs or
grows past memory, every diagnostic is located."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tracemalloc

import pytest

from ppir.frontend.loader import load_schedule, load_text

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _check(cli, tmp_path, text: str):
    path = tmp_path / "s.pps"
    path.write_text(text)
    return cli("check", str(path))


# ------------------------------------------------------------------ check accepts what runs
def test_a_post_waited_once_only_is_refused(cli, tmp_path):
    code, _, err = _check(
        cli,
        tmp_path,
        "ranks 2\nrank 0: 0F0 post[0SEND_F0] post[0SEND_F0] wait[0SEND_F0] [0RECV_B0] 0B0\n"
        "rank 1: [1RECV_F0] [1RECV_F0] 1F0 1B0 [1SEND_B0]\n",
    )
    assert code == 1 and "s.pps:2:" in err


def test_a_message_sent_twice_is_refused(cli, tmp_path):
    code, _, err = _check(
        cli,
        tmp_path,
        "ranks 2\nrank 0: 0F0 [0SEND_F0] [0SEND_F0] [0RECV_B0] 0B0\n"
        "rank 1: [1RECV_F0] [1RECV_F0] 1F0 1B0 [1SEND_B0]\n",
    )
    assert code == 1 and "s.pps:2:" in err


def test_a_message_between_stages_of_one_rank_is_refused(cli, tmp_path):
    code, _, err = _check(
        cli,
        tmp_path,
        "ranks 1\nstages 2\nplacement [0, 0]\n"
        "rank 0: 0F0 [0SEND_F0 1RECV_F0] 1F0 1B0 [1SEND_B0 0RECV_B0] 0B0\n",
    )
    assert code == 1 and "s.pps:4:" in err


# ------------------------------------------------------------------ every finding located
def test_findings_about_a_rank_without_ops_are_located():
    from ppir.verify import verify

    report = verify(
        load_text("ranks 2\nstages 2\nplacement looped\nrank 0: 0F0 0B0\n", path="s.pps")
    )
    assert not report.ok
    assert all(d.span is not None for d in report.diagnostics), [
        d.message for d in report.diagnostics if d.span is None
    ]


def test_the_summary_of_many_findings_is_located():
    from ppir.verify import verify

    ops = " ".join(f"0F{m}" for m in range(40))  # 40 missing backwards
    report = verify(load_text(f"ranks 1\nrank 0: {ops}\n", path="s.pps"))
    assert all(d.span is not None for d in report.diagnostics)


# ------------------------------------------------------------------ cost is O(ops)
def test_completeness_of_a_two_op_program_makes_few_findings(monkeypatch):
    from ppir.diagnostics import Diagnostic
    from ppir.verify import verify

    made = [0]
    init = Diagnostic.__init__

    def counting(self, *a, **k):
        made[0] += 1
        init(self, *a, **k)

    s = load_text("ranks 1\nmicrobatches 100000\nrank 0: 0F0 0B0\n", path="s.pps")
    monkeypatch.setattr(Diagnostic, "__init__", counting)
    report = verify(s)
    assert not report.ok and made[0] <= 100, f"{made[0]:,} diagnostics for 2 ops"


def test_lowering_many_ranks_needs_no_ranks_squared_memory():
    from ppir.passes import LowerComms

    s = load_schedule("gpipe", {"P": 2048, "M": 1})
    tracemalloc.start()
    try:
        LowerComms("lockstep").apply(s)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20, f"{peak / 2**20:.0f} MiB to lower 8,190 ops"  # ranks^2: 32 MiB more


def _limited(argv: list[str], timeout: float):
    """``ppir argv`` in a child process held to 2 GiB of memory and ``timeout`` seconds."""

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    try:
        return subprocess.run(
            [sys.executable, "-m", "ppir.cli", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=limit,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"ppir {' '.join(argv)} still running after {timeout} s")


@pytest.mark.slow
def test_gpipe_with_65536_ranks_checks_within_memory():
    r = _limited(["check", "gpipe", "-D", "P=65536", "-D", "M=3"], timeout=120)
    assert r.returncode == 0 and "393,216 compute ops" in r.stdout, r.stderr[-2000:]


@pytest.mark.slow
def test_a_two_op_program_with_the_most_microbatches_the_caps_allow_is_reported(tmp_path):
    path = tmp_path / "s.pps"
    path.write_text("ranks 1\nmicrobatches 2500000\nrank 0: 0F0 0B0\n")
    r = _limited(["check", str(path)], timeout=10)  # the fuzz limit
    assert r.returncode == 1 and f"{path}:3:" in r.stderr, r.stderr[-2000:]
