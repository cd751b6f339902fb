"""The torchelastic error file a failing rank writes is whole or absent: torch's agent parses it
when the rank ends and raises on a partial file (a rank stopped halfway through a plain write
left an empty one, and ``ppir launch`` ended in a JSONDecodeError traceback)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from ppir.torch import failures  # noqa: E402


def test_the_record_is_torch_format_plus_ppir(tmp_path, monkeypatch):
    path = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
    failures._write_error_file(1, "own", "rank 1: boom", "rank 1: boom", None)
    rec = json.loads(path.read_text())
    assert rec["message"]["message"] == "rank 1: boom"
    assert rec["ppir"]["rank"] == 1 and rec["ppir"]["kind"] == "own"
    assert rec["ppir"]["usage"] is False  # the user's mistake only when fail() says so
    assert [p.name for p in tmp_path.iterdir()] == ["error.json"]  # no temporary left behind


def test_a_write_stopped_halfway_leaves_the_previous_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
    failures._write_error_file(0, "own", "first", "first", None)

    def half(obj, f):
        f.write('{"message": ')
        raise OSError("stopped")

    monkeypatch.setattr(failures.json, "dump", half)
    failures._write_error_file(0, "secondary", "second", "first", None)
    assert json.loads(path.read_text())["ppir"]["message"] == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["error.json"]


def test_no_file_is_written_without_a_launcher(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_ERROR_FILE", raising=False)
    monkeypatch.chdir(tmp_path)
    failures._write_error_file(0, "own", "m", "m", None)
    assert list(tmp_path.iterdir()) == []


def test_torchrun_names_the_failure_a_stopping_rank_quotes_as_root_cause(tmp_path, monkeypatch):
    """Rank 1 fails; rank 0 stops because of it within the same second.  torchrun's summary
    calls the record with the smallest whole-second timestamp (the lowest rank on a tie) the
    root cause: it named rank 0's 'lost the connection to rank 1' instead of rank 1's error."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    clock = iter([1000.2, 1000.4])
    monkeypatch.setattr(failures.time, "time", lambda: next(clock))
    files = {}
    for rank, kind, text in ((1, "own", "rank 1: boom"), (0, "secondary", "rank 0: lost rank 1")):
        files[rank] = tmp_path / f"{rank}.json"
        monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(files[rank]))
        failures._write_error_file(rank, kind, text, "rank 1: boom", None)
    ends = {  # by rank, as torch's agent lists them
        r: ProcessFailure(local_rank=r, pid=1, exitcode=1, error_file=str(files[r]))
        for r in sorted(files)
    }
    root, _ = ChildFailedError("ppir.run", ends).get_first_failure()
    assert root == 1


def test_a_ppir_diagnostic_is_one_line_without_traceback(tmp_path, monkeypatch):
    """``--dump-plan`` into a missing folder raised ppir's bad-output error on rank 0 after its
    first step; ``ppir launch`` printed ``rank 0: PpirError: ppir: error: cannot write ...``
    and a traceback through ppir's own files, as if it were the user's code."""
    from ppir.diagnostics import cannot_write

    path = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")  # no wait for readers

    def leave(code):
        raise SystemExit(code)

    monkeypatch.setattr(failures.os, "_exit", leave)
    exc = cannot_write("/nowhere/plan.json", FileNotFoundError(2, "No such file or directory"))
    with pytest.raises(SystemExit):
        failures.fail(None, 0, exc)
    rec = json.loads(path.read_text())["ppir"]
    assert rec["message"] == "rank 0: cannot write /nowhere/plan.json: No such file or directory"
    assert rec["traceback"] is None and rec["kind"] == "own"
