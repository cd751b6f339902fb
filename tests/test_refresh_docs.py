"""tools/refresh_docs.py keeps a quoted output's ``...`` elision as it is written: the same
lines before and after it, refreshed from the command."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location(
        "refresh_docs", ROOT / "tools" / "refresh_docs.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


OUTPUT = {
    "ppir list": ["a  1", "b  2", "c  3", "d  4", "e  5"],
    "ppir check x": ["ok: x"],
}


def _refresh(text: str, monkeypatch) -> str:
    tool = _tool()
    monkeypatch.setattr(tool, "run", lambda cmd: list(OUTPUT[cmd]))
    return tool.refresh(text)


def test_an_elided_block_followed_by_a_blank_line_keeps_its_tail(monkeypatch):
    """Was: the blank line before the next ``$`` counted as one of the lines after ``...``,
    so the refresh pulled one more line of the output (README's ``ppir list`` gained
    ``v_min``) though nothing had changed."""
    text = "```\n$ ppir list\na  1\n...\nd  4\ne  5\n\n$ ppir check x\nok: x\n```\n"
    assert _refresh(text, monkeypatch) == text


def test_an_elided_block_at_the_end_of_its_code_block(monkeypatch):
    text = "```\n$ ppir list\na  1\n...\ne  5\n```\n"
    assert _refresh(text, monkeypatch) == text


def test_a_changed_output_is_refreshed_around_the_elision(monkeypatch):
    text = "```\n$ ppir list\nold\n...\nold\nold\n\n$ ppir check x\nstale\n```\n"
    new = "```\n$ ppir list\na  1\n...\nd  4\ne  5\n\n$ ppir check x\nok: x\n```\n"
    assert _refresh(text, monkeypatch) == new
