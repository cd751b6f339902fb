"""ppir.cli.output: plain aligned tables, and progress bars on a terminal's stderr only."""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppir.cli import main
from ppir.cli.output import add_quiet_argument, progress, table
from ppir.schedules import builtin_names


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


# ------------------------------------------------------------------ tables
def test_table_aligns_columns_and_leaves_no_trailing_spaces():
    rows = [["rank", "busy", "idle"], [0, "24", "9"], [10, "1.5", "-"]]
    assert table(rows).splitlines() == ["rank  busy  idle", "0     24    9", "10    1.5   -"]
    assert table(rows, align="<>").splitlines() == [
        "rank  busy  idle",
        "0       24     9",
        "10     1.5     -",
    ]
    assert table(rows, align=">", gap=" | ").splitlines()[1] == "   0 |   24 |    9"


def test_a_short_row_spans_the_remaining_columns():
    rows = [["v", "bubble", "peak"], ["1", "0.25", "4"], ["2", "error: not divisible by 3"]]
    lines = table(rows, align=">").splitlines()
    assert lines == ["v  bubble  peak", "1    0.25     4", "2  error: not divisible by 3"]


def test_table_edge_cases():
    assert table([]) == ""
    assert table([["only"]]) == "only"
    assert table([["a", ""], ["bb", ""]]) == "a\nbb"
    with pytest.raises(ValueError, match="align"):
        table([["a"]], align="^")


words = st.text(alphabet="abcxyz0189=,.%", min_size=1, max_size=8)


@given(st.integers(1, 5).flatmap(lambda n: st.lists(st.lists(words, min_size=n, max_size=n))))
def test_table_cells_are_recovered_from_their_columns(rows):
    """Every cell of a full row starts at its column's offset and reads back unchanged."""
    lines = table(rows).splitlines()
    assert len(lines) == len(rows)
    if not rows:
        return
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    starts = [sum(widths[:i]) + 2 * i for i in range(len(widths))]
    for line, row in zip(lines, rows):
        assert line == line.rstrip()
        for i, cell in enumerate(row):
            assert line[starts[i] : starts[i] + widths[i]].rstrip() == cell


def test_ppir_list_is_one_aligned_table(cli):
    code, out, _ = cli("list")
    lines = out.splitlines()
    assert code == 0 and len(lines) == len(builtin_names())
    col = lines[0].index("P=4")
    assert all(line[col - 2 : col] == "  " and line[col] == "P" for line in lines)
    assert all(line == line.rstrip() for line in lines)


_NAIVE = ["examples/bad_schedule.pps", "--lowering", "naive"]  # a deadlock: exit 1


@pytest.mark.parametrize(
    "argv, check",
    [
        (["compile", *_NAIVE, "--backend", "cost"], _NAIVE),
        (["analyze", *_NAIVE], _NAIVE),
        (["dump", *_NAIVE], _NAIVE),
        (["compile", "1f1b", "-D", "P=0", "--backend", "cost"], ["1f1b", "-D", "P=0"]),  # exit 2
    ],
)
def test_a_failing_command_writes_its_json_nowhere_and_its_diagnostic_to_stderr(cli, argv, check):
    """docs/cli-output.md: exit 1 or 2 leaves stdout empty (a script reading it gets no
    half a document); the diagnostic goes to stderr; ``check --format json`` has it as JSON."""
    code, out, err = cli(*argv, "--format", "json")
    assert code in (1, 2) and out == "" and "error:" in err
    code2, out, _ = cli("check", *check, "--format", "json")
    assert code2 == code and '"ok": false' in out and '"diagnostics"' in out


# ------------------------------------------------------------------ progress
def test_progress_on_a_terminal_counts_shows_the_status_and_clears_itself():
    tty = Terminal()
    with progress(5, "demo", file=tty, unit="choice") as bar:
        assert bar.shown
        for i in range(4):
            bar.update(status=f"P={i}")
        bar.update(0, status="P=9: ok")  # a status change alone redraws
    text = tty.getvalue()
    assert "demo:" in text and "4/5" in text and "P=9: ok" in text and "choice/s" in text
    assert text.endswith("\r") and text.rsplit("\r", 2)[-2].strip() == ""  # cleared


def test_progress_restart_begins_an_open_ended_phase():
    tty = Terminal()
    with progress(50, "fuzz x", file=tty) as bar:
        bar.update()
        bar.restart("shrinking the failure at P=16")
        bar.update(0, "P=8: failed")
    text = tty.getvalue()
    last = text[text.index("shrinking") :]
    assert "/50" not in last and "0 it" in last and "P=8: failed" in last


def test_progress_is_cleared_when_the_work_fails():
    tty = Terminal()
    with pytest.raises(KeyboardInterrupt):
        with progress(3, "tune", file=tty) as bar:
            bar.update()
            raise KeyboardInterrupt
    assert tty.getvalue().endswith("\r")


@pytest.mark.parametrize("stream, quiet", [(io.StringIO(), False), (Terminal(), True)])
def test_progress_writes_nothing_when_piped_or_quiet(stream, quiet):
    with progress(3, "tune", file=stream, quiet=quiet) as bar:
        assert not bar.shown
        bar.update(status="x")
        bar.restart("again")
    assert stream.getvalue() == ""


def test_hidden_progress_does_not_import_tqdm():
    code = (
        "import sys, io; from ppir.cli.output import progress\n"
        "with progress(2, 'x', file=io.StringIO()) as bar: bar.update()\n"
        "assert 'tqdm' not in sys.modules, 'tqdm imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_progress_defaults_to_stderr_at_entry(monkeypatch):
    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    with progress(2, "check") as bar:
        bar.update()
    assert "check:" in tty.getvalue()


def test_quiet_flag():
    p = argparse.ArgumentParser()
    add_quiet_argument(p)
    assert p.parse_args(["-q"]).quiet and p.parse_args(["--quiet"]).quiet
    assert not p.parse_args([]).quiet


# ------------------------------------------------------------------ ppir fuzz, the first user
FUZZ = ["fuzz", "1f1b", "--over", "P=2..5", "--over", "M=P..3P", "--examples", "12"]


def test_fuzz_on_a_terminal_shows_a_bar_and_keeps_stdout_clean(monkeypatch, capsys):
    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    assert main(FUZZ) == 0
    assert capsys.readouterr().out.startswith("ok: 1f1b: 12 parameter choices hold")
    text = tty.getvalue()
    assert "fuzz 1f1b:" in text and "/12" in text and "choice" in text
    assert text.endswith("\r")


def test_fuzz_shows_the_failure_it_shrinks(monkeypatch, capsys):
    from pathlib import Path

    bad = Path(__file__).resolve().parent.parent / "examples" / "bad_schedule.pps"
    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    argv = ["fuzz", str(bad), "--over", "P=2..16", "--over", "M=P..8P", "--max-peak", "P"]
    assert main(argv) == 1
    assert "shrinking the failure at P=16 M=128" in tty.getvalue()
    assert capsys.readouterr().out.startswith("FAILED: ")


def test_fuzz_quiet_on_a_terminal_writes_nothing(monkeypatch, capsys):
    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    assert main([*FUZZ, "-q"]) == 0
    assert tty.getvalue() == ""


def test_the_example_of_cli_output_md_runs(monkeypatch, capsys):
    """docs/cli-output.md's example, with the names it leaves to the reader filled in."""
    from types import SimpleNamespace

    doc = (Path(__file__).resolve().parent.parent / "docs" / "cli-output.md").read_text()
    [block] = re.findall(r"```python\n(.*?)```", doc, re.S)
    jobs = [SimpleNamespace(schedule="1f1b", v=1), SimpleNamespace(schedule="zbv", v=2)]
    rows = [["1f1b", 21, "0.375"], ["zbv", 17, "0.0625"]]
    namespace = {"jobs": jobs, "results": [], "rows": rows, "run_one": lambda job: job}
    exec(compile(block, "docs/cli-output.md", "exec"), namespace)  # noqa: S102
    parser = argparse.ArgumentParser()
    namespace["add_arguments"](parser)
    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    namespace["run"](parser.parse_args([]))
    assert namespace["results"] == jobs and "tune:" in tty.getvalue()
    assert capsys.readouterr().out == (
        "schedule  step time  bubble\n1f1b             21   0.375\nzbv              17  0.0625\n"
    )
    assert parser.parse_args(["-q"]).quiet


# ------------------------------------------------------------------ every command with a bar
BARRED = {
    "tune": (["tune", "-P", "4", "--global-batch", "16", "--memory-budget", "6A",
              "--schedules", "1f1b,zbv"], "tune:"),
    "sweep": (["sweep", "1f1b", "--over", "M=4,8,12", "-D", "P=2"], "sweep M:"),
    "synth": (["synth", "-D", "P=4", "-D", "M=8", "--mem-cap", "4"], "synth:"),
    "check": (["check", "1f1b", "-D", "P=4", "-D", "M=8"], "compile 1f1b(P=4, M=8):"),
    "compile": (["compile", "zbv", "-D", "P=2", "-D", "M=4", "--backend", "cost"],
                "compile zbv(P=2, M=4):"),
    "dump": (["dump", "1f1b", "-D", "P=2", "-D", "M=2"], "compile 1f1b(P=2, M=2):"),
    "analyze": (["analyze", "gpipe", "-D", "P=2"], "compile gpipe("),
}  # fmt: skip


def _run_on_a_terminal(argv, monkeypatch, capsys):
    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    code = main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out, tty.getvalue()


@pytest.mark.parametrize("name", sorted(BARRED))
def test_each_command_shows_progress_on_a_terminal_and_not_with_quiet(name, monkeypatch, capsys):
    import ppir.cli.common

    monkeypatch.setattr(ppir.cli.common, "COMPILE_PROGRESS_DELAY", 0.0)  # show even a fast one
    argv, label = BARRED[name]
    out, bar = _run_on_a_terminal(argv, monkeypatch, capsys)
    assert label in bar and bar.endswith("\r"), bar[:300]  # drawn, then cleared
    assert label not in out  # the bar never reaches stdout
    quiet_out, quiet_bar = _run_on_a_terminal([*argv, "--quiet"], monkeypatch, capsys)
    assert quiet_bar == "" and quiet_out == out


@pytest.mark.parametrize("name", sorted(BARRED))
def test_piped_commands_write_no_bar(name, cli):
    code, _, err = cli(*BARRED[name][0])  # pytest's capture is no terminal
    assert code == 0 and err == ""


def test_a_compile_shows_its_stages_after_the_delay(monkeypatch, capsys):
    import ppir.cli.common

    monkeypatch.setattr(ppir.cli.common, "COMPILE_PROGRESS_DELAY", 0.0)
    _, bar = _run_on_a_terminal(["check", "1f1b", "-D", "P=2"], monkeypatch, capsys)
    for stage in ("input", "lower-comms", "overlap-comms", "verify", "timeline"):
        assert f", {stage}" in bar


def test_a_compile_shows_the_expansion_and_torchs_order_building_too(monkeypatch, capsys):
    """The clock started after the schedule was loaded: a large expansion (gpipe at P=65536,
    seconds) or torch building its own order (torch:LoopedBFS at P=16, M=256, v=4: 4 s of its
    constructor) showed nothing.  The line now starts with the argument and its loading, then
    takes the schedule's full name."""
    import ppir.cli.common

    monkeypatch.setattr(ppir.cli.common, "COMPILE_PROGRESS_DELAY", 0.0)
    _, bar = _run_on_a_terminal(["check", "1f1b", "-D", "P=2"], monkeypatch, capsys)
    assert "compile 1f1b: 00:00, expand" in bar, bar[:300]
    assert "compile 1f1b(P=2, M=8): 00:00, input" in bar, bar[:300]
    pytest.importorskip("torch")
    _, bar = _run_on_a_terminal(["check", "torch:GPipe", "-D", "P=2"], monkeypatch, capsys)
    assert "compile torch:GPipe: 00:00, torch builds its order" in bar, bar[:300]


def test_a_fast_compile_prints_nothing_extra_on_a_terminal(monkeypatch, capsys):
    """The default delay (2 s) hides the line of a compile that takes milliseconds."""
    out, bar = _run_on_a_terminal(["check", "1f1b", "-D", "P=2"], monkeypatch, capsys)
    assert bar == "" and out.startswith("ok: 1f1b")


def test_a_hidden_delayed_bar_writes_nothing_even_on_status_changes():
    tty = Terminal()
    with progress(None, "compile x", file=tty, delay=60, clock=True) as bar:
        assert bar.shown
        bar.update(0, "verify")  # a bare refresh would ignore tqdm's delay
    assert tty.getvalue() == ""


def test_a_clock_bar_ticks_without_updates():
    import time

    tty = Terminal()
    with progress(None, "compile x", file=tty, clock=True) as bar:
        bar.update(0, "verify")
        time.sleep(1.3)
    text = tty.getvalue()
    assert "compile x: 00:01, verify" in text and "it/s" not in text


def test_a_delayed_clock_bar_drawn_by_its_ticker_alone_is_cleared():
    # was: a status set before the delay, then a long stage: the ticker drew the line but tqdm,
    # which saw no print of its own, left it on the screen ('viz x.html: 00:02, pagewrote ...')
    import time

    tty = Terminal()
    with progress(None, "viz x.html", file=tty, delay=0.5, clock=True) as bar:
        bar.update(0, "page")
        time.sleep(1.7)
    text = tty.getvalue()
    assert "viz x.html: 00:01, page" in text
    assert re.search(r"\r +\r$", text), text  # cleared: stdout's next line starts clean


# ------------------------------------------------------------------ tables from one place
_WIDTH = r"\{[^{}:]*:(.?[<>^=])?[+\- ]?#?0?"  # a format spec up to its width, if any
_HAND_ALIGNED = re.compile(
    r"\.(ljust|rjust|center)\("  # str padding
    + "|"
    + _WIDTH
    + r"\d+[,_]?(\.\d+)?[a-z%]?\}"  # f"{x:<13}", f"{r:>3}", f"{x:8s}"
    + "|"
    + _WIDTH
    + r"\{"  # f"{x:>{width}}"
    + r"|%-?\d+[sd]"  # "%-10s"
)


def test_the_alignment_pattern_finds_hand_made_tables():
    for bad in ["c.rjust(w)", 'f"{q:<13} {t}"', 'f"{r:>{w}}"', '"%-8s" % x', 'f"{x:8s}"']:
        assert _HAND_ALIGNED.search(bad), bad
    for fine in ['f"{x:.3f}"', 'f"{n:,}"', 'f"{p:.1%}"', '"  ".join(cells)', 'f"{x:g}"']:
        assert not _HAND_ALIGNED.search(fine), fine


def test_commands_align_tables_only_through_output_table():
    root = Path(__file__).resolve().parent.parent
    files = [*(root / "ppir" / "cli").glob("*.py"), *(root / "backends" / "cost").glob("*.py")]
    hits = [
        f"{path.relative_to(root)}:{n}: {line.strip()}"
        for path in files
        if path.name != "output.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if _HAND_ALIGNED.search(line)
    ]
    assert not hits, "align with ppir.cli.output.table():\n" + "\n".join(hits)


# ------------------------------------------------------------------ import, show torch:NAME
def test_import_shows_its_reading_and_verifying_after_the_delay(tmp_path, monkeypatch, capsys):
    """'ppir import' reads and verifies (torch:Interleaved1F1B at P=64, M=512, v=4 took 21 s on
    2 cores, with nothing on the terminal): the compile's clock line, as 'ppir check' shows it;
    nothing with --quiet, and stdout the same."""
    import ppir.cli.common

    monkeypatch.setattr(ppir.cli.common, "COMPILE_PROGRESS_DELAY", 0.0)
    csv = tmp_path / "two.csv"
    csv.write_text("0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1\n")
    out, bar = _run_on_a_terminal(["import", str(csv)], monkeypatch, capsys)
    assert f"import {csv}: 00:00, reading" in bar and ", verify" in bar and bar.endswith("\r"), bar[
        :300
    ]
    assert out.startswith(f"# imported by ppir from {csv}")
    quiet_out, quiet_bar = _run_on_a_terminal(["import", str(csv), "-q"], monkeypatch, capsys)
    assert quiet_bar == "" and quiet_out == out


def test_an_import_that_does_not_verify_prints_its_diagnostics_after_the_bar(
    tmp_path, monkeypatch, capsys
):
    import ppir.cli.common

    monkeypatch.setattr(ppir.cli.common, "COMPILE_PROGRESS_DELAY", 0.0)
    csv = tmp_path / "bad.csv"
    csv.write_text("0F0,0B0,0F1,0B1\n1B0,1F0,1F1,1B1\n")  # rank 1 runs B0 before F0
    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    assert main(["import", str(csv)]) == 1
    text = tty.getvalue()
    assert "error:" in text and text.rindex("\r") < text.index("error:")  # cleared, then said
    assert capsys.readouterr().out == ""


def test_show_torch_shows_the_import_progress_and_takes_quiet(monkeypatch, capsys):
    pytest.importorskip("torch")
    import ppir.cli.common

    monkeypatch.setattr(ppir.cli.common, "COMPILE_PROGRESS_DELAY", 0.0)
    argv = ["show", "torch:GPipe", "-D", "P=2", "-D", "M=2"]
    out, bar = _run_on_a_terminal(argv, monkeypatch, capsys)
    assert "show torch:GPipe: 00:00, torch's schedule" in bar and bar.endswith("\r"), bar[:300]
    quiet_out, quiet_bar = _run_on_a_terminal([*argv, "--quiet"], monkeypatch, capsys)
    assert quiet_bar == "" and quiet_out == out


def test_fuzz_shows_the_choice_it_is_checking(monkeypatch, capsys):
    """A choice can take long (interleaved_1f1b at P=64, v=4, M=512: 17 s): the bar names it
    while it is checked, not only the one before it ('P=32 v=2 M=32: ok' stood for 17 s)."""
    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    assert main(["fuzz", "1f1b", "--over", "P=2..3", "-D", "M=4", "--examples", "2"]) == 0
    text = tty.getvalue()
    assert text.index("P=2: checking") < text.index("P=3: checking")  # (outcomes: throttled)
    assert "M=4" not in text  # what is drawn, as the outcome names it


def test_sweep_shows_the_value_it_is_measuring(monkeypatch, capsys):
    """A value can take long (interleaved_1f1b at P=64, M=512, v=4: 8 s): the bar names it
    while it is measured, not only the value before it."""
    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    assert main(["sweep", "1f1b", "--over", "M=2,3", "-D", "P=2"]) == 0
    text = tty.getvalue()
    assert text.index("M=2: measuring") < text.index("M=3: measuring")


def test_sweep_and_fuzz_print_their_whole_finding_with_exit_1(cli):
    """docs/cli-output.md: the two exceptions to 'exit 1 leaves stdout empty'."""
    code, out, err = cli("sweep", "1f1b", "--over", "M=0,4", "-D", "P=2", "--format", "json")
    rows = json.loads(out)["rows"]  # a whole document
    assert code == 1 and "error" in rows[0] and "measured" in rows[1] and "(M=0)" in err
    bad = str(Path(__file__).resolve().parent.parent / "examples" / "bad_schedule.pps")
    code, out, _ = cli("fuzz", bad, "--over", "P=2..4", "--over", "M=P..2P", "--max-peak", "P")
    assert code == 1 and out.startswith("FAILED: ")
