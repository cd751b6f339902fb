"""The command line, run in-process: exit codes, help, list/show/dump."""

from __future__ import annotations

import json

import pytest

from ppir.cli.main import COMMAND_MODULES, build_parser
from ppir.schedules import builtin_names


def test_list_shows_every_builtin_with_parameters(cli):
    code, out, _ = cli("list")
    assert code == 0
    for name in builtin_names():
        assert name in out
    assert "P=4, M=8, v=2" in out


def test_show_prints_the_source(cli):
    code, out, _ = cli("show", "1f1b")
    assert code == 0 and out.startswith("#") and "program r {" in out


def test_dump_text_reparses(cli, tmp_path):
    code, out, _ = cli("dump", "interleaved_1f1b", "-D", "P=2", "-D", "M=4")
    assert code == 0 and "[" in out and "SEND_F" in out
    f = tmp_path / "lowered.pps"
    f.write_text(out)
    code2, out2, _ = cli("dump", str(f))
    assert code2 == 0 and out2 == out


def test_dump_json_format(cli):
    code, out, _ = cli("dump", "1f1b", "-D", "P=2", "-D", "M=2", "--format", "json", "--no-overlap")
    obj = json.loads(out)
    assert code == 0 and obj["format"] == "ppir.program/1"
    assert obj["programs"][0] == [
        "0F0",
        "0SEND_F0",
        "0F1",
        "0SEND_F1",
        "0RECV_B0",
        "0B0",
        "0RECV_B1",
        "0B1",
    ]
    assert obj["placement"] == [0, 1] and obj["params"] == {"P": 2, "M": 2}
    # by default dump prints what runs: the same groups, posted early and waited late
    code, out, _ = cli("dump", "1f1b", "-D", "P=2", "-D", "M=2", "--format", "json")
    overlapped = json.loads(out)
    assert code == 0 and overlapped["deferred"] and overlapped["waits"]


def test_dump_compute_only(cli):
    code, out, _ = cli(
        "dump", "1f1b", "-D", "P=2", "-D", "M=2", "--compute-only", "--format", "json"
    )
    assert json.loads(out)["programs"] == [
        ["0F0", "0F1", "0B0", "0B1"],
        ["1F0", "1B0", "1F1", "1B1"],
    ]


def test_csv_is_accepted_wherever_a_schedule_is(cli, tmp_path):
    f = tmp_path / "s.csv"
    f.write_text("0F0,0F1,,0B0,0B1\n,1F0,1B0,1F1,1B1\n")
    code, out, _ = cli("dump", str(f), "--compute-only")
    assert code == 0 and "rank 1: 1F0 1B0 1F1 1B1" in out
    code, _, err = cli("dump", str(f), "--placement", "0,0")
    assert code == 2 and "placement" in err


def test_usage_errors_exit_2(cli, capsys):
    assert cli("dump", "no_such_schedule")[0] == 2
    assert cli("dump", "1f1b", "-D", "P")[0] == 2
    with pytest.raises(SystemExit) as e:
        cli("dump")
    assert e.value.code == 2


@pytest.mark.parametrize("command", COMMAND_MODULES)
def test_every_command_has_help_with_an_example(command, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "example" in out.lower() and f"ppir {command}" in out


def test_console_script_runs():
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "ppir.cli", "list"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and "1f1b" in r.stdout
