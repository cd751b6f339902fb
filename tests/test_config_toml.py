"""Cost-config files are read by the standard TOML parser (``tomllib``; ``tomli`` on 3.10), and
malformed ones are diagnostics at the parser's file:line:col, never tracebacks."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from ppir.analysis.config import _toml_position, load_config_file, make_config
from ppir.diagnostics import PpirError

ROOT = Path(__file__).resolve().parent.parent


def test_the_example_config_reads_on_this_python():
    data = load_config_file(str(ROOT / "examples" / "cost_config.toml"))
    assert data["comm"]["inter_bandwidth_gbs"] == 50 and data["hardware"]["efficiency"] == 0.45
    cfg = make_config(data)
    assert cfg.model.seq == 4096 and cfg.hardware.name == "H100" and cfg.ranks_per_node == 4
    assert cfg.efficiency == 0.45 and cfg.inter.bandwidth == 50e9


def test_the_parser_is_the_standard_one(monkeypatch):
    parser = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    real, texts = parser.loads, []
    monkeypatch.setattr(parser, "loads", lambda text: texts.append(text) or real(text))
    load_config_file(str(ROOT / "examples" / "cost_config.toml"))
    assert len(texts) == 1 and "[hardware]" in texts[0]
    assert not (ROOT / "ppir" / "analysis" / "tomlmini.py").exists()


@pytest.mark.parametrize(
    "text, line, col, message",
    [
        ("[costs]\nF = 1\nF = 2\n", 3, 6, "Cannot overwrite a value"),
        ("[hardware]\nefficiency = 0.45.1\n", 2, 18, "Expected newline or end of document"),
        ("[model]\npreset = 'a'\n[model\n", 3, 7, "twice"),
        ("[comm]\nlatency = \n", 2, 11, "Invalid value"),
        ('[model]\npreset = "llama3-8b', 2, 20, "Unterminated string"),  # at end of document
    ],
)
def test_malformed_toml_names_file_line_col(tmp_path, monkeypatch, text, line, col, message):
    monkeypatch.chdir(tmp_path)
    Path("bad.toml").write_text(text)
    with pytest.raises(PpirError) as ei:
        load_config_file("bad.toml")
    d = ei.value.diagnostics[0]
    assert ei.value.kind == "bad-config" and ei.value.exit_code == 2
    assert (d.span.path, d.span.line, d.span.col) == ("bad.toml", line, col)
    assert d.message.startswith("not valid TOML: ") and message in d.message
    assert "(at " not in d.message  # the position is the span, not repeated in the text
    rendered = ei.value.render().splitlines()
    assert rendered[0].startswith(f"bad.toml:{line}:{col}: error: not valid TOML: ")
    assert rendered[1] == f"{line} | {text.splitlines()[line - 1]}"
    assert rendered[2].index("^") == len(f"{line} | ") + col - 1


def test_the_cli_reports_the_position_without_a_traceback(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("costs.toml").write_text("[costs]\nF = 1\nB = two\n")
    code, out, err = cli("compile", "1f1b", "--backend", "cost", "--config", "costs.toml")
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith("costs.toml:3:5: error: not valid TOML: Invalid value\n3 | B = two\n")


def test_unreadable_config_is_a_diagnostic(tmp_path):
    with pytest.raises(PpirError, match="cannot read cost config"):
        load_config_file(str(tmp_path / "missing.toml"))


class _NewStyleError(ValueError):
    """What tomli 2.1+ and Python 3.14's tomllib raise: the position as attributes."""

    def __init__(self):
        super().__init__("Invalid value (at line 7, column 3)")
        self.msg, self.lineno, self.colno = "Invalid value", 7, 3


def test_position_attributes_are_preferred_when_the_parser_has_them():
    assert _toml_position(_NewStyleError(), "") == (7, 3, "Invalid value")
    old = ValueError("Invalid value (at line 2, column 9)")
    assert _toml_position(old, "") == (2, 9, "Invalid value")
    end = ValueError("Unterminated string (at end of document)")
    assert _toml_position(end, "a\nbc") == (2, 3, "Unterminated string")
    assert _toml_position(ValueError("Unknown"), "x") == (None, None, "Unknown")


def test_an_error_without_a_position_still_names_the_file(tmp_path, monkeypatch):
    parser = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")

    class NoPosition(parser.TOMLDecodeError):
        def __init__(self):
            ValueError.__init__(self, "Something new")  # a message that gives no position

    def fail(text):
        raise NoPosition

    monkeypatch.setattr(parser, "loads", fail)
    path = tmp_path / "c.toml"
    path.write_text("[costs]\n")
    with pytest.raises(PpirError) as ei:
        load_config_file(str(path))
    assert ei.value.diagnostics[0].span is None
    assert ei.value.render() == f"ppir: error: {path}: not valid TOML: Something new"


@pytest.mark.parametrize("preset", ["5", '["llama3-8b"]', "true"])
def test_a_model_preset_that_is_no_name_is_one_line(cli, tmp_path, preset):
    """``[model] preset = 5`` ended in a traceback (AttributeError: 'int' object has no
    attribute 'endswith'; a list: unhashable type), where ``[hardware] preset = 5`` was one
    line."""
    path = tmp_path / "costs.toml"
    path.write_text(f"[model]\npreset = {preset}\n")
    code, out, err = cli("compile", "1f1b", "--config", str(path))
    value = {"5": "5", "true": "True"}.get(preset, "['llama3-8b']")
    assert code == 2 and not out
    assert err == f"ppir: error: {path}: model.preset must be a name, got {value}\n"
