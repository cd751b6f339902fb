"""The command line, run in-process: exit codes, help, list/show/dump."""

from __future__ import annotations

import json
import re

import pytest

from ppir.cli.argtypes import key_values
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


def test_show_of_a_csv_or_json_program_with_d_says_it_takes_no_parameters(cli, tmp_path):
    # was: "prints the source of x.csv, which holds for every parameter value", with the hint
    # 'ppir dump x.csv -D ...', which refuses -D for a CSV
    csv = tmp_path / "x.csv"
    csv.write_text("0F0,0B0\n1F0,1B0\n")
    code, out, err = cli("show", str(csv), "-D", "P=2")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"ppir: error: unknown parameter 'P' (-D P=2) for {csv}",
        "hint: a CSV schedule takes no parameters: it is one fixed program",
    ]
    js = tmp_path / "x.json"
    js.write_text(cli("dump", "1f1b", "-D", "P=2", "-D", "M=2", "--format", "json")[1])
    code, out, err = cli("show", str(js), "-D", "M=2")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"ppir: error: unknown parameter 'M' (-D M=2) for {js}",
        "hint: a JSON program takes no parameters: it is one fixed program",
    ]
    assert cli("show", str(csv))[1] == "0F0,0B0\n1F0,1B0\n"  # without -D: the file as it is


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


def test_placement_ranks_are_ascii_digits(cli):
    """--placement ٠,١ was read as 0,1 (int() reads Arabic-Indic digits), where -D refuses them."""
    code, out, err = cli("compile", "torch:GPipe", "-D", "P=2", "--placement", "٠,١")
    assert code == 2 and out == ""
    assert err.startswith("ppir: error: --placement ٠,١: expected comma-separated ranks")


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


@pytest.mark.parametrize("module", ["ppir.cli", "ppir"])
def test_console_script_runs(module):
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", module, "list"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and "1f1b" in r.stdout


@pytest.mark.parametrize("command", ["launch", "profile"])
@pytest.mark.parametrize(
    "module, said",
    [("examples/nope.py", "no such file"), ("no_such_pkg.model", "no such file or importable")],
)
def test_a_missing_model_module_is_refused_before_any_process_starts(cli, command, module, said):
    pytest.importorskip("torch")
    argv = ["-n", "2", "1f1b"] if command == "launch" else ["--ranks", "2", "--stages", "2"]
    code, out, err = cli(command, *argv, "--module", module)
    assert code == 2
    assert f"--module {module}: {said}" in err
    assert "ppir launch:" not in out and "Traceback" not in err  # nothing was started


@pytest.mark.parametrize("command", ["profile", "launch"])
def test_a_module_without_the_api_is_refused_before_any_process_starts(cli, tmp_path, command):
    pytest.importorskip("torch")
    mod = tmp_path / "wrong_names.py"
    mod.write_text("def build(s, n): pass\ndef batch(step): pass\ndef loss(y, t): pass\n")
    argv = ["-n", "2", "1f1b"] if command == "launch" else ["--ranks", "2", "--stages", "2"]
    code, out, err = cli(command, *argv, "--module", str(mod))
    assert code == 2 and "ppir launch:" not in out and "Traceback" not in err
    assert err.splitlines()[0].startswith(
        f"ppir: error: model '{mod}' lacks build_stage, make_batch, loss_fn; it defines batch, "
        "build, loss"
    ), err
    assert len(err.splitlines()) == 1  # once, not once per rank
    if command == "launch":  # read from its source: torch was not even imported
        return
    # the module's own configure() refusing an option: its exception, with its traceback, under
    # the command's header (exit 1: the model's code failed)
    code, _, err = cli(
        command, *argv, "--module", "examples/gpt_model.py", "--module-opt", "nope=1"
    )
    assert code == 1 and err.startswith("ppir profile: failed:\nTraceback"), err
    assert err.endswith(
        "ValueError: unknown gpt_model options ['nope']; known: ['batch', "
        "'d_model', 'heads', 'layers', 'lr', 'seed', 'seq', 'vocab']\n"
    ), err


def test_a_build_stage_with_the_wrong_parameters_is_one_line_before_any_process(cli, tmp_path):
    """Was rank 0's TypeError traceback, through ppir's frames only, exit 1."""
    pytest.importorskip("torch")
    mod = tmp_path / "one_arg.py"
    mod.write_text("def build_stage(stage): pass\ndef make_batch(step): pass\n"
                   "def loss_fn(y, t): pass\n")  # fmt: skip
    code, out, err = cli("profile", "--ranks", "2", "--stages", "2", "--module", str(mod))
    assert code == 2 and out == "" and "Traceback" not in err
    assert err == (
        f"ppir: error: model '{mod}': build_stage(stage) at one_arg.py:1 cannot be called as "
        "build_stage(stage, num_stages), as the runtime calls it (too many positional "
        "arguments); a model module defines build_stage(stage, num_stages), make_batch(step) "
        "and loss_fn(output, target); docs/executor.md\n"
    )


def test_a_misspelt_module_opt_of_a_keyword_configure_is_one_line(cli, tmp_path):
    """Was a TypeError traceback from ppir's call of configure(), exit 1."""
    pytest.importorskip("torch")
    mod = tmp_path / "kw.py"
    api = "def build_stage(s, n): pass\ndef make_batch(step): pass\ndef loss_fn(y, t): pass\n"
    mod.write_text("def configure(width=16): pass\n" + api)
    argv = ["--ranks", "2", "--stages", "2", "--module", str(mod), "--module-opt", "widht=8"]
    code, out, err = cli("profile", *argv)
    assert (
        code == 2
        and out == ""
        and err
        == (
            f"ppir: error: --module-opt widht=8: model '{mod}' has no option 'widht' (its "
            "configure(width=16) at kw.py:1); did you mean 'width'?\n"
        )
    )


def _usage_error(capsys, *argv: str) -> str:
    from ppir.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(list(argv))
    assert e.value.code == 2
    return capsys.readouterr().err


def test_a_misspelt_option_gets_its_command_usage_and_the_closest_option(capsys):
    err = _usage_error(capsys, "check", "1f1b", "--lowring", "naive")
    assert "usage: ppir check" in err
    assert "ppir check: error: unrecognized arguments: --lowring naive" in err
    assert "did you mean '--lowering'?" in err
    assert "did you mean '--global-batch'?" in _usage_error(capsys, "tune", "--globl-batch=8")
    err = _usage_error(capsys, "--bogus")
    assert "usage: ppir [-h]" in err and "unrecognized arguments: --bogus" in err
    err = _usage_error(capsys, "--bogus", "check", "1f1b")  # given to ppir, not to check
    assert err.splitlines()[-1] == "ppir: error: unrecognized arguments: --bogus"
    err = _usage_error(capsys, "check", "1f1b", "--bogus")  # nothing alike: no guess
    assert err.splitlines()[-1] == "ppir check: error: unrecognized arguments: --bogus"


def test_another_commands_option_is_said_to_be_theirs(capsys):
    """'ppir check 1f1b --model llama3-8b' guessed '--comm-model', an unrelated option, though
    --model is compile's (and check's lowering plans with a model's costs from --config)."""
    err = _usage_error(capsys, "check", "1f1b", "--model", "llama3-8b")
    assert err.splitlines()[-1] == (
        "ppir check: error: unrecognized arguments: --model llama3-8b (--model is an option of "
        "'ppir compile', 'ppir analyze', 'ppir sweep', 'ppir tune', 'ppir viz'; 'ppir check' "
        "takes a model's shape from --config FILE's [model] table)"
    )
    err = _usage_error(capsys, "dump", "1f1b", "--gpu-memory", "8GiB")
    assert err.splitlines()[-1].endswith("(--gpu-memory is an option of 'ppir tune')")


def test_a_misspelt_command_or_choice_gets_the_closest_one(capsys):
    """argparse lists the choices without a guess (quoted or bare, by Python version); flags
    already had one."""
    err = _usage_error(capsys, "lanch", "1f1b")
    assert err.splitlines()[-1].startswith("ppir: error: argument COMMAND: invalid choice: 'lanch'")
    assert re.search(r"'?synth'?\) \(did you mean 'launch'\?\)$", err.splitlines()[-1])
    err = _usage_error(capsys, "check", "1f1b", "--lowering", "eagr")
    assert re.search(r"'?naive'?\) \(did you mean 'eager'\?\)$", err.splitlines()[-1])
    err = _usage_error(capsys, "xyz")  # nothing alike: no guess
    assert re.search(r"'?synth'?\)$", err.splitlines()[-1])  # quoted or not, by Python


def test_a_parameter_given_twice_with_two_values_is_refused(cli):
    code, _, err = cli("check", "1f1b", "-D", "P=4", "-D", "P=5")
    assert code == 2 and "-D P=5: 'P' is already given (-D P=4)" in err
    code, out, _ = cli("check", "1f1b", "-D", "P=4", "-D", "P=4")
    assert code == 0 and "1f1b(P=4, M=8)" in out


@pytest.mark.parametrize(
    "argv, message, hint",
    [
        (
            ["compile", "1f1b", "--backend", "cost", "--cost", "F=1,F=2"],
            "--cost F=1,F=2: 'F' is given twice (F=1, then F=2)",
            "give each op kind once",
        ),
        (
            ["synth", "-D", "P=4", "-D", "M=8", "--mem-cap", "4", "--cost", "B=2,F=1,F=0.5"],
            "--cost B=2,F=1,F=0.5: 'F' is given twice (F=1, then F=0.5)",
            "give each op kind once",
        ),
        (
            ["synth", "-D", "P=4", "-D", "M=8", "--mem-cap", "4", "--cost", "F=1,F=2.0,B=2"],
            "--cost F=1,F=2.0,B=2: 'F' is given twice (F=1, then F=2.0)",
            "give each op kind once",
        ),
        (  # two --cost options read as one list, as two -D do (was: the first one dropped)
            ["compile", "1f1b", "--backend", "cost", "--cost", "F=1,B=3", "--cost", "F=2"],
            "--cost F=1,B=3,F=2: 'F' is given twice (F=1, then F=2)",
            "give each op kind once",
        ),
        (
            ["synth", "-D", "P=4", "-D", "M=8", "--mem-cap", "4", "--cost", "I=2", "--cost", "I=1"],
            "--cost I=2,I=1: 'I' is given twice (I=2, then I=1)",
            "give each op kind once",
        ),
        (
            ["analyze", "1f1b", "--model", "llama3-8b,seq=4096,seq=2048"],
            "--model llama3-8b,seq=4096,seq=2048: 'seq' is given twice (seq=4096, then seq=2048)",
            "give each field once",
        ),
        (
            ["check", "1f1b", "-p", "lower-comms{strategy=eager strategy=naive}"],
            "lower-comms: 'strategy' is given twice (strategy=eager, then strategy=naive)",
            "give each option of lower-comms once",
        ),
    ],
)
def test_a_key_given_twice_with_two_values_is_refused_as_d_is(cli, argv, message, hint):
    code, out, err = cli(*argv)
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"ppir: error: {message}", f"hint: {hint}"]


@pytest.mark.parametrize(
    "argv",
    [
        ["compile", "1f1b", "--backend", "cost", "--cost", "F=2,F=2.0"],
        ["synth", "-D", "P=4", "-D", "M=8", "--mem-cap", "4", "--cost", "F=1,F=1"],
        ["analyze", "1f1b", "--model", "llama3-8b,seq=4096,seq=4096"],
        ["check", "1f1b", "-p", "lower-comms{strategy=eager strategy=eager}"],
    ],
)
def test_a_key_given_twice_with_one_value_is_accepted_as_d_is(cli, argv):
    code, out, _ = cli(*argv)
    assert code == 0 and out


def test_every_cost_option_counts(cli):
    # was: '--cost B=3 --cost F=2' timed B at its default 2, the first --cost silently dropped
    code, out, err = cli("compile", "1f1b", "--backend", "cost", "--cost", "B=3", "--cost", "F=2")
    assert code == 0, err
    assert "assuming uniform costs F=2 B=3 I=1 W=1 per rank share" in out
    argv = ("synth", "-D", "P=2", "-D", "M=4", "--mem-cap", "2", "-q")
    code, out, err = cli(*argv, "--cost", "B=3,I=2", "--cost", "F=2")
    assert code == 0, err
    assert "(estimator at F=2 B=3 I=2 W=1, free comm)" in out.splitlines()[0]


def test_cost_options_joined_keep_a_trailing_comma_and_refuse_an_empty_one(cli):
    # each --cost may end with a comma, as one alone may (was: '--cost F=1, --cost B=3' read as
    # 'F=1,,B=3', an empty entry the user never typed)
    base = ("compile", "1f1b", "--backend", "cost")
    code, out, err = cli(*base, "--cost", "F=1,", "--cost", "B=3")
    assert code == 0, err
    assert "assuming uniform costs F=1 B=3 I=1 W=1 per rank share" in out
    # an empty --cost is refused beside another as it is alone (was: '--cost F=1 --cost ""'
    # read as 'F=1,', accepted)
    for argv in (("--cost", "F=1", "--cost", ""), ("--cost", "", "--cost", "F=1")):
        code, out, err = cli(*base, *argv)
        assert code == 2 and "--cost '': expected K=X,..., e.g. --cost F=1,B=2" in err, err
    synth = ("synth", "-D", "P=2", "-D", "M=4", "--mem-cap", "2", "-q")
    code, out, err = cli(*synth, "--cost", "F=2", "--cost", " ")
    assert code == 2 and "--cost '': expected K=X,..." in err, err


def test_a_module_option_given_twice_with_two_values_is_refused():
    assert key_values(["a=1", "a=1.0", "b=x"], "--module-opt") == {"a": 1, "b": "x"}
    with pytest.raises(ValueError) as e:
        key_values(["a=1", "b=x", "a=2"], "--module-opt")
    assert str(e.value) == "--module-opt a=2: 'a' is given twice (a=1, then a=2)"


def test_a_module_option_is_a_number_only_in_ascii_digits_and_only_when_a_float_holds_it():
    opts = ["a=1e400", "b=-1E+400", "c=\u0661\u0662", "d=\u0663.5", "e=1e308", "f=12", "g=1e-3"]
    assert key_values(opts, "--module-opt") == {
        "a": "1e400",  # was inf, which the docs say stays text
        "b": "-1E+400",
        "c": "\u0661\u0662",  # Arabic-Indic digits: int() read 12
        "d": "\u0663.5",
        "e": 1e308,
        "f": 12,
        "g": 1e-3,
    }
    assert key_values(["h=" + "1" * 5000], "--module-opt") == {"h": "1" * 5000}  # was a ValueError


def test_a_missing_cost_config_is_named_in_one_line(cli, tmp_path):
    missing = tmp_path / "nope.toml"
    code, _, err = cli("compile", "1f1b", "--config", str(missing))
    assert code == 2
    said = f"ppir: error: cannot read cost config {missing}: No such file or directory"
    assert err.strip() == said


def test_a_dotted_model_module_in_the_working_directory_is_found(tmp_path):
    """The ranks run ``python -m ppir.run``, which finds modules in the working directory; the
    ``ppir`` script's check must find them there too (its own path starts at its bin folder)."""
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("torch")
    script = Path(sys.executable).parent / "ppir"
    if not script.exists():
        pytest.skip("no ppir console script beside this interpreter")
    (tmp_path / "mymodel.py").write_text(
        "def build_stage(s, n): pass\ndef make_batch(step): pass\ndef loss_fn(y, t): pass\n"
    )
    argv = [str(script), "launch", "-n", "3", "1f1b", "-D", "P=2"]
    res = subprocess.run([*argv, "--module", "mymodel"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)  # fmt: skip
    assert res.returncode == 2 and "-n 3: the schedule has 2 ranks" in res.stderr, res.stderr
    res = subprocess.run([*argv, "--module", "othermodel"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)  # fmt: skip
    assert res.returncode == 2 and "--module othermodel: no such file or importable" in res.stderr


def test_check_of_a_pipeline_without_lower_comms_says_it_is_not_lowered(cli):
    """-p overlap-comms alone leaves the program compute-only: check said '0 messages;
    deadlock-free under rendezvous semantics' while compile timed its 48 transfers."""
    code, out, err = cli("check", "1f1b", "-p", "overlap-comms")
    assert code == 0, err
    assert "64 compute ops; not lowered: its 48 cross-rank transfers have no sends" in out
    assert "deadlock-free" not in out
    code, out, err = cli("compile", "1f1b", "-p", "overlap-comms", "--format", "json")
    assert json.loads(out)["messages"]["count"] == 48
    for argv in (["-D", "P=1"], ["-D", "P=1", "-p", "overlap-comms"]):  # nothing to lower
        code, out, err = cli("check", "1f1b", "-D", "M=4", *argv)
        assert code == 0 and "8 compute ops, 0 messages; deadlock-free" in out, err


def test_a_directory_named_like_a_builtin_does_not_hide_it(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpipe").mkdir()  # was: "gpipe is a directory, not a schedule file"
    code, out, err = cli("check", "gpipe", "-D", "P=2")
    assert code == 0 and out.startswith("ok: gpipe(P=2"), err
    (tmp_path / "mine").mkdir()
    code, _, err = cli("check", "mine")
    assert code == 2 and "mine is a directory, not a schedule file" in err


def test_check_json_reports_unusable_input_too(cli, tmp_path):
    """It printed nothing on stdout for a syntax error or a bad -D (only text on stderr)."""
    bad = tmp_path / "s.pps"
    bad.write_text("schedule s(P = 2, M = 4)\nranks P\nmicrobatches M\nprogram r {\n  F(\n}\n")
    for argv in ([str(bad)], ["1f1b", "-D", "M=abc"]):
        code, out, err = cli("check", *argv, "--format", "json")
        doc = json.loads(out)
        assert code == 2 and err  # the text diagnostic as well
        assert doc["format"] == "ppir.check/1" and doc["ok"] is False and doc["schedule"] is None
        assert doc["diagnostics"][0]["kind"] in ("syntax-error", "bad-define")


def test_pass_options_separated_by_a_comma_are_told_to_use_spaces(cli):
    # read as one option, strategy = 'eager,strategy=naive': 'unknown lowering strategy'
    code, out, err = cli("check", "1f1b", "-p", "lower-comms{strategy=eager,strategy=naive}")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "ppir: error: lower-comms: 'strategy=eager,strategy=naive' is one option whose value "
        "holds a ','",
        "hint: separate the options of a pass with spaces: lower-comms{a=1 b=2}",
    ]
    # a comma and a space: was "'strategy' is given twice (strategy=eager,, then ...)"; a
    # trailing comma: "unknown lowering strategy 'eager,'"
    for text, part in [("strategy=eager, strategy=naive", "strategy=eager,"),
                       ("strategy=eager,", "strategy=eager,")]:  # fmt: skip
        code, out, err = cli("check", "1f1b", "-p", f"lower-comms{{{text}}}")
        assert (code, out) == (2, "")
        assert err.splitlines()[0] == (
            f"ppir: error: lower-comms: '{part}' is one option whose value holds a ','"
        )


def test_a_boolean_pass_option_refuses_what_is_neither_true_nor_false():
    import dataclasses

    from ppir.diagnostics import PpirError
    from ppir.passes.driver import _options

    @dataclasses.dataclass
    class Flagged:  # a plug-in pass with a boolean option
        deep: bool = False

    assert _options(Flagged, "flagged", "deep=yes") == {"deep": True}
    assert _options(Flagged, "flagged", "deep=off") == {"deep": False}
    with pytest.raises(PpirError, match="flagged: deep takes true or false, got 'maybe'"):
        _options(Flagged, "flagged", "deep=maybe")  # was read as False


def test_one_rank_summaries_say_rank_stage_microbatch_in_the_singular(cli):
    """check, analyze and compile --backend cost printed '1 ranks, 1 stages, 1 microbatches'
    for GPipe at P=1, M=1 (as torch:GPipe -D P=1 -D M=1 gives)."""
    code, out, _ = cli("check", "gpipe", "-D", "P=1", "-D", "M=1")
    assert code == 0
    assert out.startswith("ok: gpipe(P=1, M=1): 1 rank, 1 stage, 2 compute ops, 0 messages;")
    for argv in (("analyze",), ("compile", "--backend", "cost")):
        code, out, _ = cli(*argv, "gpipe", "-D", "P=1", "-D", "M=1")
        assert code == 0
        assert out.splitlines()[0] == "gpipe(P=1, M=1): 1 rank, 1 stage, 1 microbatch", argv


def test_a_schedule_of_two_pipelines_says_how_they_share_its_microbatches(cli):
    """analyze and compile --backend cost headed DualPipe at -D M=16 with '4 ranks, 8 stages,
    8 microbatches': one pipeline's count, with no word of the two pipelines that share 16."""
    want = "dualpipe(P=4, M=16): 4 ranks, 8 stages in 2 pipelines, 16 microbatches (8 per pipeline)"
    for argv in (("analyze",), ("compile", "--backend", "cost")):
        code, out, err = cli(*argv, "dualpipe", "-D", "P=4", "-D", "M=16")
        assert code == 0, err
        assert out.splitlines()[0] == want, argv
    code, out, err = cli("compile", "dualpipe", "-D", "P=4", "-D", "M=16", "--backend", "cost",
                         "--format", "json")  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["microbatches"], doc["pipelines"]) == (16, 2)  # as the text's first line
    code, out, err = cli("compile", "1f1b", "-D", "P=4", "-D", "M=8", "--backend", "cost",
                         "--format", "json")  # fmt: skip
    assert code == 0 and "pipelines" not in json.loads(out), err


def test_compile_analyze_and_tune_json_count_microbatches_alike(cli):
    """`microbatches` meant two things: compile's and analyze's JSON gave DualPipe at -D M=16
    one pipeline's count (8), tune's the step's (16, with microbatches_per_pipeline 8).  Now
    the three give `microbatches` per step and `microbatches_per_pipeline`; the formats whose
    field changed meaning say so in their version."""
    dual = ["dualpipe", "-D", "P=4", "-D", "M=16", "--format", "json"]
    docs = {}
    for argv in (("compile", "--backend", "cost", *dual), ("analyze", *dual)):
        code, out, err = cli(*argv)
        assert code == 0, err
        docs[argv[0]] = json.loads(out)
    code, out, err = cli("tune", "-P", "4", "--schedules", "dualpipe", "--global-batch", "16",
                         "--format", "json", "-q")  # fmt: skip
    assert code == 0, err
    docs["tune"] = json.loads(out)["ranked"][0]
    keys = ("microbatches", "microbatches_per_pipeline")
    assert {name: tuple(d[k] for k in keys) for name, d in docs.items()} == {
        "compile": (16, 8),
        "analyze": (16, 8),
        "tune": (16, 8),
    }
    assert docs["compile"]["pipelines"] == docs["analyze"]["pipelines"] == 2
    assert docs["compile"]["format"] == "ppir.estimate/2"
    assert docs["analyze"]["format"] == "ppir.analysis/2"
    code, out, err = cli("compile", "1f1b", "-D", "P=4", "-D", "M=8", "--format", "json")
    assert code == 0, err
    assert tuple(json.loads(out)[k] for k in keys) == (8, 8)  # one pipeline: the same count


def _two_pipelines(tmp_path):
    """DualPipe's program, declaring M microbatches per pipeline (2M per step) where the
    built-in declares M // 2 (M per step)."""
    from importlib import resources

    source = resources.files("ppir.schedules").joinpath("dualpipe.pps").read_text()
    for old, new in [
        ("schedule dualpipe(P = 4, M = 8)", "schedule mine(P = 4, M = 4)"),
        ("require M % 2 == 0 and M >= 2 * P", "require M >= P"),
        ("microbatches M // 2", "microbatches M"),  # M per pipeline, 2M per step
        ("0 .. M // 2 - P", "0 .. M - P"),
    ]:
        assert old in source, old
        source = source.replace(old, new)
    path = tmp_path / "mine.pps"
    path.write_text(source)
    return path


def test_tune_counts_the_microbatches_of_the_program_it_ran(cli, tmp_path):
    """tune's JSON rows counted microbatches their own way: `microbatches` was the M it passed
    the schedule, right only when M is the step's count (DualPipe declares M // 2 per
    pipeline).  A schedule of two pipelines that declares `microbatches M` runs 2M per step,
    as compile's JSON says (16 at M=8); tune gives it the M whose step runs the global batch's
    8 (M=4: 8 per step, 4 per pipeline)."""
    path = _two_pipelines(tmp_path)
    keys = ("microbatches", "microbatches_per_pipeline")
    code, out, err = cli("compile", str(path), "-D", "P=4", "-D", "M=8", "--format", "json")
    assert code == 0, err
    assert tuple(json.loads(out)[k] for k in keys) == (16, 8)
    code, out, err = cli("tune", "-P", "4", "--schedules", str(path), "--global-batch", "8",
                         "--format", "json", "-q")  # fmt: skip
    assert code == 0, err
    (row,) = json.loads(out)["ranked"]
    assert (row["microbatches"], row["microbatches_per_pipeline"]) == (8, 4)


def test_tune_runs_the_global_batch_through_a_schedule_whose_m_is_one_pipelines(cli, tmp_path):
    """A schedule of two pipelines declaring `microbatches M` was given M = G / (dp x mbs) and
    ran twice the batch: at world 8, dp 2, G=16 its rows said 16 microbatches (2x8) for mbs 1,
    timing a step of 32 samples.  Each step now runs G / (dp x mbs), given M = that / 2; a
    count no whole M gives is rejected, and the text says which -D M= tune gave it."""
    path = _two_pipelines(tmp_path)
    code, out, err = cli("tune", "--world", "8", "--pp", "4", "--model", "llama3-8b",
                         "--schedules", str(path), "--global-batch", "16", "--micro-batch",
                         "1,2", "--recompute", "none", "--format", "json", "-q")  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    rows = [r for k in ("ranked", "slower", "pruned") for r in report[k]]
    assert rows and {r["mbs"] for r in rows} == {1}
    for r in rows:
        assert r["microbatches"] == 16 // (r["dp"] * r["mbs"]), r
        assert r["microbatches_per_pipeline"] == r["microbatches"] // 2, r
        assert r["params"] == {"P": 4, "M": r["microbatches"] // 2}, r  # the -D M= it was given
    (bad,) = report["rejected"]  # mbs 2: a step of 4 is M=2, which its require refuses
    assert (bad["mbs"], bad["microbatches"], bad["rejected"]) == (2, 4, "constraint")
    assert bad["reason"].startswith("M=2 (for a step of 4 microbatches): requirement failed")
    code, out, err = cli("tune", "-P", "4", "--schedules", str(path), "--global-batch", "8")
    assert code == 0 and " 8 (2x4) " in out, out
    assert f"M (k x m): {path} runs M microbatches in 2 pipelines of m each; its own M" in out
    code, out, err = cli("tune", "-P", "4", "--schedules", str(path), "--global-batch", "5",
                         "--format", "json")  # fmt: skip
    assert code == 1, err
    reasons = {r["schedule"]: r["reason"] for r in json.loads(out)["rejected"]}
    assert reasons[str(path)] == (
        "M=5 runs 10 microbatches per step (2 pipelines of 5); the global batch needs 5"
    )


def test_a_tune_row_gives_the_parameters_that_compile_reproduces_it_with(cli):
    """A JSON row said pp, v and microbatches, not the -D values its schedule was expanded
    with (a schedule's M need not be the step's count); 'params' holds them, and compiling
    with them gives the row's step time."""
    code, out, err = cli("tune", "-P", "4", "--global-batch", "16", "--format", "json",
                         "--top", "3", "-q")  # fmt: skip
    assert code == 0, err
    for row in json.loads(out)["ranked"]:
        flags = [x for k, v in row["params"].items() for x in ("-D", f"{k}={v}")]
        code, text, err = cli("compile", row["schedule"], *flags, "--backend", "cost",
                              "--format", "json")  # fmt: skip
        assert code == 0, err
        assert json.loads(text)["step_time"] == row["step_time"], row


def test_the_closest_choice_is_found_whether_argparse_quotes_the_choices_or_not():
    """Later 3.12 and 3.13 releases and 3.14 print argparse's choices bare ('choose from
    list, show, ...', gh-117766): the quoted ones alone were read, so no guess was given."""
    from ppir.cli.main import _closest_choice

    quoted = "argument COMMAND: invalid choice: 'lanch' (choose from 'list', 'launch', 'viz')"
    bare = "argument COMMAND: invalid choice: 'lanch' (choose from list, launch, viz)"
    assert _closest_choice(quoted) == " (did you mean 'launch'?)"
    assert _closest_choice(bare) == " (did you mean 'launch'?)"
    assert _closest_choice("argument --lowering: invalid choice: 'xyz' (choose from a, b)") == ""


def test_a_one_rank_schedule_on_more_processes_says_rank_in_the_singular(cli):
    """'ppir launch -n 2 1f1b -D P=1' said '-n 2: the schedule has 1 ranks'."""
    pytest.importorskip("torch")
    code, _, err = cli(
        "launch", "-n", "2", "1f1b", "-D", "P=1", "-D", "M=2", "--module", "examples/gpt_model.py"
    )
    assert code == 2 and "-n 2: the schedule has 1 rank\n" in err, err


def test_check_counts_ops_messages_and_transfers_as_it_counts_ranks(cli):
    """'1 compute ops, 1 messages', 'its 1 cross-rank transfers have' and '1,000 ranks, 1,000
    stages, 16000 compute ops, 15984 messages': the op and message counts skipped count()."""
    code, out, _ = cli("check", "gpipe", "-D", "P=1", "-D", "M=1", "-p", "forward-only")
    assert code == 0 and "(forwards only), 1 compute op, 0 messages;" in out, out
    code, out, _ = cli("check", "gpipe", "-D", "P=2", "-D", "M=1", "-p", "forward-only")
    assert code == 0 and "its 1 cross-rank transfer has no sends" in out, out
    code, out, _ = cli("check", "gpipe", "-D", "P=2", "-D", "M=1", "-p", "forward-only,lower-comms")
    assert code == 0 and "2 compute ops, 1 message; deadlock-free" in out, out
    code, out, _ = cli("check", "gpipe", "-D", "P=1000", "-D", "M=8")
    assert code == 0 and "1,000 stages, 16,000 compute ops, 15,984 messages;" in out, out
