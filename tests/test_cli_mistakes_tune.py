"""User mistakes on 'ppir tune': a value that means nothing is a one-line usage error (exit 2)
naming the flag and the value, never a traceback nor a silent default; the default schedule
list is the built-ins whatever the current directory holds."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from ppir.verify.words import ordinal

_MODEL = ["--gpu-memory", "80GiB", "--model", "llama3-8b"]
_NO_MODEL = ["-P", "4", "--memory-budget", "6A"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--world", "0", *_MODEL], "argument --world: must be at least 1, got 0"),
        (["--world", "-8", *_MODEL], "argument --world: must be at least 1, got -8"),
        (["--pp", "4", "--tp", "0", *_MODEL], "argument --tp: must be at least 1, got 0"),
        ([*_NO_MODEL, "--global-batch", "0"], "argument --global-batch: must be at least 1, got 0"),
        ([*_NO_MODEL, "--top", "0"], "argument --top: must be at least 1, got 0"),
        ([*_NO_MODEL, "--top", "-1"], "argument --top: must be at least 1, got -1"),
    ],
)
def test_a_value_below_one_is_a_usage_error(cli, capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        cli("tune", *argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err
    assert err.splitlines()[-1] == f"ppir tune: error: {message}"


@pytest.mark.parametrize(
    "n, text",
    [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (10, "10th"), (11, "11th"), (12, "12th"),
     (13, "13th"), (21, "21st"), (22, "22nd"), (23, "23rd"), (101, "101st"), (111, "111th"),
     (112, "112th")],
)  # fmt: skip
def test_ordinals(n, text):
    assert ordinal(n) == text


@pytest.mark.parametrize("top, nth", [(1, "1st"), (2, "2nd"), (3, "3rd")])
def test_the_pruned_line_says_the_ordinal_of_top(cli, top, nth):
    code, out, err = cli("tune", *_NO_MODEL, "--top", str(top), "-q")
    assert code == 0, err
    assert f"cannot beat the {nth} ranked; not compiled" in out
    doc = json.loads(cli("tune", *_NO_MODEL, "--top", str(top), "-q", "--format", "json")[1])
    assert len(doc["ranked"]) == top and doc["pruned"]
    assert all(f"worse than the {nth} ranked step time" in c["reason"] for c in doc["pruned"])


def test_the_default_list_is_the_builtins_whatever_the_cwd_holds(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    expected = cli("tune", *_NO_MODEL, "-q", "--format", "json")
    assert expected[0] == 0, expected[2]
    (tmp_path / "gpipe").mkdir()  # was: "gpipe is a directory, not a schedule file"
    (tmp_path / "1f1b").write_text("not a schedule\n")  # was: read as the schedule 1f1b
    code, out, err = cli("tune", *_NO_MODEL, "-q", "--format", "json")
    doc = json.loads(expected[1])
    shadowed = json.loads(out)
    for part in ("ranked", "slower", "pruned", "rejected"):  # each command names the built-in
        for c, s in zip(doc[part], shadowed[part]):
            if s["schedule"] == "1f1b" and s["command"]:  # by its file, not ./1f1b
                assert shlex.split(s["command"])[2].endswith("1f1b.pps"), s["command"]
                s["command"] = c["command"]
    assert (code, shadowed, err) == (0, doc, "")
    seen = {c["schedule"] for part in ("ranked", "pruned", "rejected") for c in doc[part]}
    assert {"1f1b", "gpipe"} <= seen
    # names the user gives are resolved as every command resolves a SCHEDULE: the file first
    code, out, err = cli("tune", *_NO_MODEL, "-q", "--schedules", "1f1b")
    assert code == 2 and "Traceback" not in err and "1f1b" in err


def test_recompute_without_a_model_is_refused(cli):
    """Every row said 'none': without a model, recomputation changes nothing tune measures."""
    code, out, err = cli("tune", "-P", "4", "--memory-budget", "6A", "--recompute", "full")
    assert code == 2 and "--recompute full needs a model" in err


@pytest.mark.parametrize("flag", ["--world", "--tp"])
def test_world_or_tp_without_a_model_is_refused(cli, flag):
    code, out, err = cli("tune", *_NO_MODEL, flag, "8")
    assert code == 2 and f"{flag} 8 needs --model" in err


@pytest.mark.parametrize("value", [",", " , ,", ""])
def test_a_schedule_list_without_a_name_is_refused(cli, value):
    """(an empty --schedules "" searched every built-in, silently)"""
    code, out, err = cli("tune", *_NO_MODEL, "-q", "--schedules", value)
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"--schedules {value!r}: expected schedule names" in err


@pytest.mark.parametrize(
    "argv, message, hint",
    [
        (["--gpu-memory", "80"], "--gpu-memory 80: expected a size in bytes, e.g. 80GiB or 80GB",
         "a size needs its unit, e.g. 80GiB or 80GB"),
        (["--gpu-memory", "80G"], "--gpu-memory 80G: expected a size in bytes, e.g. 80GiB or "
         "80GB", "a size needs its unit, e.g. 80GiB or 80GB"),
        (["--gpu-memory", "80GiB", "--reserve", "10"], "--reserve 10: expected a percentage of "
         "--gpu-memory, e.g. 10%, or bytes with a unit, e.g. 8GiB", "did you mean --reserve 10%?"),
        (["--memory-budget", "60"], "--memory-budget 60: expected a size in bytes, e.g. 80GiB or "
         "80GB", "a size needs its unit, e.g. 60GiB or 60GB"),
    ],
)  # fmt: skip
def test_a_memory_size_without_its_unit_names_the_flag_and_the_unit(cli, argv, message, hint):
    """was: 'memory size 80: expected ...' naming no flag, and for '--reserve 10' (meaning
    10 %) only byte sizes, though --reserve takes a percentage."""
    code, _, err = cli("tune", "--world", "64", "--tp", "8", "--model", "llama3-8b", *argv)
    assert code == 2
    assert err.splitlines() == [f"ppir: error: {message}", f"hint: {hint}"]


def test_a_reserve_in_a_is_refused_not_read_as_bytes(cli):
    """was: '--gpu-memory 80GiB --reserve 6A' reserved 6 bytes: the budget was 80 GiB."""
    code, out, err = cli("tune", "--world", "64", "--tp", "8", *_MODEL, "--reserve", "6A", "-q")
    assert code == 2 and out == "", out
    assert "--reserve 6A: expected a percentage of --gpu-memory, e.g. 10%, or bytes" in err


@pytest.mark.parametrize("budget", [["--memory-budget", "60GiB", "--model", "llama3-8b"], []])
def test_a_reserve_without_gpu_memory_is_refused(cli, budget):
    """was: '--memory-budget 60GiB --reserve 20%' ranked under 60 GiB, the reserve silently
    dropped (and without any budget too)."""
    argv = ["--world", "64", "--tp", "8"] if budget else ["-P", "4"]
    code, out, err = cli("tune", *argv, *budget, "--reserve", "20%", "-q")
    assert code == 2 and out == "", out
    assert "ppir: error: --reserve 20% is kept free of --gpu-memory, which is not given" in err


def test_a_recompute_mode_cut_short_gets_the_one_it_begins(cli):
    """'--recompute sel' got no guess: 'selective' is too far from 'sel' by similarity."""
    code, out, err = cli("tune", "-P", "8", "--recompute", "full,sel")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "ppir: error: --recompute sel: expected none, selective, full",
        "hint: did you mean 'selective'?",
    ]
    from ppir.diagnostics import did_you_mean

    assert did_you_mean("s", ["selective", "full"]) == []  # one letter: no guess
    assert did_you_mean("f", ["full", "fifo"]) == []
    assert did_you_mean("fi", ["full", "fifo"]) == ["did you mean 'fifo'?"]
    assert did_you_mean("ful", ["fully", "fuller"]) == ["did you mean 'fully'?"]  # similarity


def test_without_memory_sizes_a_unitless_budget_is_pointed_at_a(cli):
    """'--memory-budget 80G' without a model was told to write 80GiB, which is refused next
    (a budget in bytes needs memory sizes)."""
    for value in ("80", "80G"):
        code, _, err = cli("tune", "-P", "4", "--memory-budget", value)
        assert code == 2
        assert err.splitlines()[-1] == (
            "hint: without memory sizes (--model, or a cost file that holds them) a budget is "
            "in A, e.g. 80A"
        )


def test_a_reserve_of_zero_needs_no_unit(cli):
    argv = ["tune", "--model", "llama3-8b", "--world", "8", "--gpu-memory", "80GiB", "-q"]
    code, out, err = cli(*argv, "--reserve", "0", "--top", "1")
    assert code == 0, err
    assert "budget 80.00 GiB per GPU" in out.splitlines()[0]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--gpu-memory", "nanGiB"], "--gpu-memory nanGiB: expected a finite size, e.g. 80GiB"),
        (["--gpu-memory", "infGiB"], "--gpu-memory infGiB: expected a finite size, e.g. 80GiB"),
        (["--memory-budget", "nanGiB"], "--memory-budget nanGiB: expected a finite size, e.g. "
         "80GiB"),
        (["--gpu-memory", "80GiB", "--reserve", "infGiB"], "--reserve infGiB: expected a finite "
         "size, e.g. 80GiB"),
    ],
)  # fmt: skip
def test_a_memory_size_that_is_no_number_is_refused(cli, argv, message):
    """was: '--gpu-memory nanGiB' ranked every choice under 'budget nan KiB per GPU' (nan
    compares false with every peak), and '--gpu-memory infGiB' said '--reserve None leaves
    nothing of infGiB', naming a reserve the user never gave."""
    code, out, err = cli("tune", "--world", "8", "--model", "llama3-8b", *argv, "-q")
    assert (code, out) == (2, "") and "Traceback" not in err
    assert err.splitlines() == [f"ppir: error: {message}"]


def test_a_budget_in_a_that_is_no_number_is_refused(cli):
    code, out, err = cli("tune", "-P", "4", "--memory-budget", "nanA", "-q")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "ppir: error: --memory-budget nanA: expected a finite size, e.g. 6A"
    ]


def test_the_model_example_in_tune_help_is_one_tune_accepts(cli):
    """was: tune's --help showed '--model ... e.g. llama3-8b,seq=4096,mbs=2', the help every
    cost command shares, and tune refuses mbs= (it searches the micro-batch size)."""
    from ppir.cli.main import build_parser

    tune = build_parser()._subparsers._group_actions[0].choices["tune"]
    (action,) = [a for a in tune._actions if "--model" in a.option_strings]
    spec = action.help.split("e.g. ")[1].split(" ")[0].rstrip(";")
    code, out, err = cli("tune", "--world", "8", "--tp", "8", "--model", spec, "--top", "1", "-q")
    assert code == 0, err


@pytest.mark.parametrize(
    "flag, value", [("--schedules", "1f1b,,zbv"), ("--pp", "2,,4"), ("--micro-batch", "1, ,2")]
)
def test_an_empty_entry_between_commas_is_refused(cli, flag, value):
    """was: skipped, so '--schedules 1f1b,,zbv' (a name deleted, or a typo) searched two
    schedules without a word; --model and --cost already refuse it."""
    code, out, err = cli("tune", "--world", "8", *_MODEL, "-q", flag, value)
    assert (code, out) == (2, "") and "Traceback" not in err
    assert err.splitlines() == [f"ppir: error: {flag} {value}: an empty entry between commas"]
    code, out, err = cli(
        "tune", "--world", "8", *_MODEL, "-q", "--top", "1", flag, value.split(",")[0] + ","
    )
    assert code in (0, 1) and err == "", err  # a trailing comma is allowed, as in --model


def test_a_world_that_is_no_multiple_of_tp_is_said_before_the_tp_is_checked(cli):
    """was: '--world 8 --tp 16' said 'tensor-parallel size tp=16 must divide kv_heads (8)', as
    if the model were the mistake, where no tp of 16 fits 8 GPUs in the first place."""
    code, out, err = cli("tune", "--world", "8", "--tp", "16", *_MODEL, "-q")
    assert (code, out) == (2, "")
    assert err.splitlines() == ["ppir: error: --world 8 must be a positive multiple of --tp 16"]


def test_gpu_memory_without_sizes_points_at_the_flag_that_takes_a(cli):
    """was: 'hint: without them give the budget in A, e.g. 6A' after '--gpu-memory 80GiB', and
    '--gpu-memory 6A' is refused next ('give bytes'): a budget in A is --memory-budget's."""
    code, out, err = cli("tune", "-P", "4", "--gpu-memory", "80GiB", "-q")
    assert (code, out) == (2, "")
    assert (
        err.splitlines()[-1] == "hint: without them give the budget in A, e.g. --memory-budget 6A"
    )
    code, out, err = cli("tune", "-P", "4", "--memory-budget", "6A", "--top", "1", "-q")
    assert code == 0, err  # what the hint says works


@pytest.mark.parametrize("sizes", ["٤", "2,٤", "４"])
def test_pipeline_sizes_are_ascii_digits(cli, sizes):
    """-P ٤ ran a search for P=4 (int() reads Arabic-Indic and fullwidth digits) where
    -D P=٤ is refused: the list's entries are read as -D's values are."""
    code, out, err = cli("tune", "-P", sizes, "--memory-budget", "6A")
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"ppir: error: --pp {sizes}: expected comma-separated integers",
        f"hint: must be an integer in ASCII digits, got '{sizes.split(',')[-1]}'",
    ]


def test_a_mistake_in_a_schedule_file_is_located_in_the_rejection(cli, tmp_path, monkeypatch):
    """was: 'ppir tune --schedules mine.pps' with a typo in mine.pps ('Bw(m)') rejected every
    choice with "unknown operation 'Bw'" and no place, and advised other batch sizes; the
    reason now says where, as 'ppir sweep' does (a failed require quotes its own words)."""
    monkeypatch.chdir(tmp_path)
    head = 'schedule mine(P = 4, M = 8)\nrequire M % 4 == 0 : "M in fours"\nranks P\n'
    body = (
        "microbatches M\nprogram r {\n  for m in 0 .. M { F(m) }\n  for m in 0 .. M { Bw(m) }\n}\n"
    )
    Path("mine.pps").write_text(head + body)
    code, out, err = cli("tune", *_NO_MODEL, "-q", "--schedules", "mine.pps")
    assert code == 1, err
    assert "    mine.pps: unknown operation 'Bw' (at mine.pps:7:21)" in out.splitlines()
    # and the advice is to fix the file, not (as it was) to try other sizes
    assert (
        "(no feasible choice): no choice compiles (the errors below point into mine.pps); fix "
        "them ('ppir check FILE -D P=.. -D M=..' shows one with its source line)"
    ) in out.splitlines()
    Path("mine2.pps").write_text(head.replace("mine", "mine2").replace("require", "# ") + body)
    code, out, err = cli(
        "tune", *_NO_MODEL, "-q", "--schedules", "mine2.pps,dualpipe", "--global-batch", "2"
    )  # dualpipe needs M >= 2P: other sizes may help there, and mine2.pps needs its fix
    assert code == 1 and "--pp values, and fix the errors in mine2.pps" in out, out
    doc = json.loads(
        cli("tune", *_NO_MODEL, "-q", "--schedules", "mine.pps", "--format", "json")[1]
    )
    assert {c["reason"] for c in doc["rejected"]} == {"unknown operation 'Bw' (at mine.pps:7:21)"}
    code, out, err = cli("tune", *_NO_MODEL, "-q", "--schedules", "mine.pps", "--global-batch", "6")
    assert "    mine.pps: requirement failed: M in fours (with M = 6)" in out.splitlines()


def test_the_micro_batch_default_in_tune_help_is_the_one_searched(cli):
    """was: --help said '(default 1,2; ...)', but without --model tune tries micro-batch 1
    only (its times are per sample, so a larger one only scales them)."""
    import re

    from ppir.cli.main import build_parser

    tune = build_parser()._subparsers._group_actions[0].choices["tune"]
    (action,) = [a for a in tune._actions if "--micro-batch" in a.option_strings]
    claim = re.search(r"default (\S+) with --model, (\S+) without", action.help)
    assert claim, action.help
    searched = []
    for argv in (["--world", "8", "--tp", "8", *_MODEL], _NO_MODEL):
        code, out, err = cli("tune", *argv, "-q", "--top", "100", "--format", "json")
        assert code == 0, err
        doc = json.loads(out)
        mbs = {c["mbs"] for part in ("ranked", "slower", "pruned", "rejected") for c in doc[part]}
        searched.append(",".join(map(str, sorted(mbs))))
    assert searched == list(claim.groups())


def test_stage_weights_need_one_stage_count(cli):
    """--stage-weights 1,2 over every pipeline size rejected 1,134 choices as constraints
    ('1f1b has 1 stages') and headed them with 'every choice exceeds the memory budget'."""
    argv = ["tune", "--world", "64", "--tp", "8", *_MODEL, "--stage-weights", "1,2", "-q"]
    code, out, err = cli(*argv)
    assert code == 2 and out == ""
    assert err == (
        "ppir: error: --stage-weights gives 2 weights, one per stage, but tune would search "
        "pipeline sizes 1, 2, 4, 8: give one --pp and one --v (and --schedules with that many "
        "stages)\n"
    )
    code, _, err = cli(*argv, "--pp", "2")
    assert code == 2 and "but tune would search several v: give one --pp" in err
    code, out, err = cli(*argv, "--pp", "2", "--v", "1", "--schedules", "1f1b")
    assert code == 0 and "stage weights 1,2" in out, err
    code, out, err = cli(*argv, "--pp", "2", "--schedules", "1f1b,zb_h1")  # neither takes v
    assert code == 0 and "stage weights 1,2" in out, err
