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
