"""A rank ends with :func:`ppir.torch.leave.leave` (``os._exit`` after the ``atexit``
handlers, open files flushed): nothing the user's code left to the interpreter's end is lost,
and the exit status is the one asked for."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_leave_runs_atexit_handlers_and_flushes_files_left_open(tmp_path):
    script = textwrap.dedent(f"""
        import atexit
        from ppir.torch.leave import leave
        log = open({str(tmp_path / "log")!r}, "w", buffering=1 << 16)
        log.write("buffered line\\n")
        atexit.register(lambda: open({str(tmp_path / "atexit")!r}, "w").write("ran"))
        print("to stdout", end="")
        leave(3)
        print("never")
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)  # fmt: skip
    assert res.returncode == 3, res.stderr
    assert res.stdout == "to stdout"
    assert (tmp_path / "log").read_text() == "buffered line\n"
    assert (tmp_path / "atexit").read_text() == "ran"


def test_leave_waits_for_threads_and_closes_what_wraps_a_file(tmp_path):
    script = textwrap.dedent(f"""
        import gzip, threading, time
        from ppir.torch.leave import leave
        z = gzip.open({str(tmp_path / "log.gz")!r}, "wt")
        z.write("x" * 6000)  # never closed: its trailer is written when it is closed
        def late():
            time.sleep(0.3)
            open({str(tmp_path / "thread")!r}, "w").write("done")
        threading.Thread(target=late).start()  # not a daemon: a normal exit waits for it
        leave(0)
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "thread").read_text() == "done"
    import gzip

    with gzip.open(tmp_path / "log.gz", "rt") as f:
        assert f.read() == "x" * 6000


def test_a_failing_atexit_handler_still_leaves_with_the_status(tmp_path):
    script = textwrap.dedent(f"""
        import atexit
        from ppir.torch.leave import leave
        log = open({str(tmp_path / "log")!r}, "w", buffering=1 << 16)
        log.write("kept\\n")
        atexit.register(lambda: 1 / 0)
        leave(0)
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)  # fmt: skip
    assert res.returncode == 0
    assert "ZeroDivisionError" in res.stderr  # printed, as a normal exit prints it
    assert (tmp_path / "log").read_text() == "kept\n"


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_launched_rank_keeps_its_atexit_work_and_open_files(tmp_path):
    pytest.importorskip("torch")
    res = subprocess.run(
        [sys.executable, "-m", "ppir.cli", "launch", "-n", "2", "1f1b", "-D", "M=2",
         "--module", str(ROOT / "tests" / "exit_hooks_model.py"), "--module-opt",
         f"out={tmp_path}", "--steps", "2", "--device", "cpu"],
        capture_output=True, text=True, timeout=150, cwd=ROOT,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Warning" not in res.stderr, res.stderr  # looking for open files disturbs nothing
    for rank in (0, 1):
        assert (tmp_path / f"atexit.{rank}").read_text() == "ran\n"
    # the last stage's rank computed 2 steps x 2 microbatches of losses
    assert (tmp_path / "log.1").read_text().count("loss ") == 4
    assert (tmp_path / "log.0").read_text() == ""
