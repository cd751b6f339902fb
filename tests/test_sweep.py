"""ppir sweep: measured figures from the IR beside closed forms, with disagreement flagged."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import pytest

from ppir import load_schedule
from ppir.cli.analyze import fmt
from ppir.cli.sweep import dependency_timing, sweep

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# stages 0 and 1 on rank 0, stage 2 on rank 1: ranks with unequal work
UNEQUAL_RANKS = (
    "schedule imb(P = 2, M = 4)\nranks P\nstages 3\nmicrobatches M\nplacement [0, 0, 1]\n"
    "program r {\n"
    "  for c in 0 .. chunks(r) { for m in 0 .. M { F(m, c) } }\n"
    "  for c in 0 .. chunks(r) { for m in 0 .. M { B(m, chunks(r) - 1 - c) } }\n}\n"
)


def test_dependency_timing_closed_forms():
    for P, M in [(1, 3), (2, 4), (4, 8), (5, 3)]:
        for name in ("gpipe", "1f1b"):
            T, busy = dependency_timing(load_schedule(name, {"P": P, "M": M}))
            assert busy == [3 * M] * P and T - busy[0] == 3 * (P - 1)
    for P, v in [(2, 2), (4, 2), (4, 4), (3, 3)]:
        T, busy = dependency_timing(load_schedule("interleaved_1f1b", {"P": P, "M": 2 * P, "v": v}))
        assert T - busy[0] == Fraction(3 * (P - 1), v)


def by_formula(row, formula):
    (p,) = [p for p in row["predictions"] if p["formula"] == formula]
    return p


def test_sweep_interleaved_flags_the_shortcut_formulas():
    rows = sweep("interleaved_1f1b", "v", [1, 2, 4], {"P": 4, "M": 8}, layers=96)
    for row in rows:
        v = row["value"]
        assert by_formula(row, "(P-1)/(v*M)")["agrees"]
        assert by_formula(row, "(v*P+P-1)/v")["agrees"]
        assert by_formula(row, "v*P-1")["agrees"]
        assert by_formula(row, "L/(P*v)")["agrees"]
        assert by_formula(row, "P*(v+1)/2")["agrees"] is False
        assert by_formula(row, "v*(P-1)")["agrees"] is (v == 1)
        assert by_formula(row, "(P-1)/(M+v*P-1)")["agrees"] is (v == 1)
    assert [r["measured"]["peak A"] for r in rows] == [7, Fraction(11, 2), Fraction(19, 4)]


@pytest.mark.parametrize("name", ["zb_h1", "zb_h2", "zbv"])
@pytest.mark.parametrize("P", [2, 4, 6])
def test_the_zero_bubble_papers_forms_hold_where_they_apply(name, P):
    """Qi et al. (ICLR'24) at F = I = W: ZB-H1's idle (P-1)(F+I-W), the peaks P and 2P-1;
    the forms apply from M = P (ZB-H2's peak from M = 2P-1) and each is checked there."""
    rows = sweep(name, "M", [1, 2, P - 1, P, 2 * P - 1, 2 * P, 4 * P], {"P": P})
    checked = 0
    for row in rows:
        for p in row["predictions"]:
            assert p["agrees"] or not p["applies"], (name, P, row["value"], p)
            checked += p["applies"]
    assert checked >= {"zb_h1": 4, "zb_h2": 2, "zbv": 2}[name] * 3


def test_sweep_cli(cli):
    code, out, err = cli(
        "sweep", "interleaved_1f1b", "--over", "v=1,2", "-D", "P=4", "-D", "M=8", "--layers", "80"
    )
    assert code == 0, err
    assert "DIFFERS" in out and "P*(v+1)/2" in out
    code, out, _ = cli("sweep", "1f1b", "--over", "M=2,4", "-D", "P=4", "--format", "json")
    d = json.loads(out)
    assert d["format"] == "ppir.sweep/1"
    assert [r["measured"]["peak A"] for r in d["rows"]] == [2, 4]
    assert "est bubble/ideal" in d["rows"][0]["measured"]  # None when no estimator
    assert all(p["agrees"] for r in d["rows"] for p in r["predictions"])


def test_sweep_reports_invalid_values_and_bad_usage(cli):
    code, out, err = cli("sweep", "interleaved_1f1b", "--over", "M=4,6", "-D", "P=4")
    assert code == 1 and "6  error: requirement failed" in out
    assert "(at <builtin>/interleaved_1f1b.pps:" in out  # where the require line is
    assert "4  " in out and "closed forms" in out  # the value that ran is still measured
    assert err.strip() == "ppir sweep: 1 of 2 values failed (M=6)"
    code, out, _ = cli("sweep", "interleaved_1f1b", "--over", "v=-1", "-D", "P=4", "-D", "M=8")
    assert code == 1 and "(no value ran)" in out and "no closed forms" not in out
    code, _, err = cli("sweep", "1f1b", "--over", "M")
    assert code == 2 and "expected NAME=V1,V2" in err
    # the list splits as fuzz's does (ppir.testing.value_lists.split_values): not inside min(...)
    code, _, err = cli("sweep", "1f1b", "--over", "M=min(4,8),2", "-D", "P=2")
    assert code == 2 and "each value of 'M' must be an integer, got 'min(4,8)'" in err
    # the value int() refuses is named (1_000 is an integer to int(); was: '1_000')
    code, _, err = cli("sweep", "1f1b", "--over", "M=1_000,x", "-D", "P=2")
    assert code == 2 and "each value of 'M' must be an integer, got 'x'" in err


def test_an_error_row_has_the_full_parameters_of_a_good_row(cli, tmp_path):
    code, out, _ = cli("sweep", "1f1b", "--over", "M=0,4", "--format", "json")
    bad, good = json.loads(out)["rows"]
    assert code == 1 and "need at least one microbatch" in bad["error"]
    assert (bad["params"], good["params"]) == ({"P": 4, "M": 0}, {"P": 4, "M": 4})
    # defaults that are expressions of others (N = P), resolved though M=3 does not expand
    bad, good = sweep("interleaved_1f1b", "M", [3, 8], {"P": 4})
    assert "group size N" in bad["error"]
    assert bad["params"] == {"P": 4, "M": 3, "v": 2, "N": 4}
    assert good["params"] == {"P": 4, "M": 8, "v": 2, "N": 4}
    # a default that cannot be evaluated for this value is left out; the rest are known
    f = tmp_path / "divz.pps"
    f.write_text(
        "schedule divz(P = 2, M = 4, N = 8 // (M - 4))\nranks P\nstages P\nmicrobatches M\n"
        "placement looped\nprogram r {\n  for m in 0 .. M { F(m) }\n  for m in 0 .. M { B(m) }\n}\n"
    )
    bad, good = sweep(str(f), "M", [4, 8], {})
    assert "division by zero" in bad["error"]
    assert (bad["params"], good["params"]) == ({"P": 2, "M": 4}, {"P": 2, "M": 8, "N": 2})


def test_sweeping_an_unknown_parameter_is_a_usage_error(cli):
    code, out, err = cli("sweep", "1f1b", "--over", "Q=1,2")
    assert code == 2 and "Traceback" not in err and out == ""
    assert err.splitlines() == [  # in every loader's words (was "--over Q=...: 1f1b has no
        # parameter 'Q'" and "hint: 1f1b takes M, P"), with the flag as given
        "ppir: error: unknown parameter 'Q' (--over Q='1,2') for schedule '1f1b'",
        "hint: its parameters: P, M",
    ]
    err = cli("sweep", "1f1b", "--over", "MM=1,2")[2]
    assert err.splitlines()[1:] == ["hint: did you mean 'M'?", "hint: its parameters: P, M"]


def test_a_parameter_given_by_over_and_by_d_is_refused(cli):
    code, out, err = cli("sweep", "1f1b", "--over", "M=2,4", "-D", "M=8", "-D", "P=2")
    assert code == 2 and out == ""  # nothing swept with one of the two silently ignored
    assert err.splitlines()[0] == "ppir: error: --over M=... and -D M=8 both set 'M'"


def test_a_second_over_is_refused_and_points_at_fuzz(cli, capsys):
    with pytest.raises(SystemExit) as e:  # was: the second silently replaced the first
        cli("sweep", "1f1b", "--over", "M=4", "--over", "P=2")
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err
    last = err.splitlines()[-1]
    assert last.startswith("ppir sweep: error: argument --over: given twice (M=4, P=2); ")
    assert "sweep sweeps one parameter; 'ppir fuzz' takes several" in last


@pytest.mark.parametrize("over", ["M=4,,8", "M=4,8,", "M=,4"])
def test_an_empty_value_in_the_over_list_is_refused(cli, over):
    code, out, err = cli("sweep", "1f1b", "--over", over, "-D", "P=4")
    assert code == 2 and out == ""  # was: the empty value silently dropped
    # was: "--over M=4,,8: the value list '4,,8' has an empty value", the value twice
    assert err.splitlines()[0] == f"ppir: error: --over {over} has an empty value"


@pytest.mark.parametrize("over, twice", [("M=4,4", "4"), ("M=4,8,4", "4"), ("M=2,4,+2", "2")])
def test_a_value_given_twice_is_refused_naming_it(cli, over, twice):
    """--over M=4,4 measured M=4 twice, a row and a closed-form line each; fuzz's lists and
    sweep's share the rule (ppir.testing.value_lists.refuse_repeats)."""
    code, out, err = cli("sweep", "1f1b", "--over", over, "-D", "P=2")
    assert code == 2 and out == ""
    assert err.splitlines() == [  # was: "--over M=4,4: the value list '4,4' lists 4 twice"
        f"ppir: error: --over {over} lists {twice} twice",
        "hint: give each value once",
    ]
    fuzzed = over.replace("M", "P")  # fuzz names the option as given, as sweep does
    code, out, err = cli("fuzz", "1f1b", "--over", fuzzed)
    assert code == 2
    assert err.splitlines()[0] == f"ppir: error: --over {fuzzed} lists {twice} twice"


def test_sweep_values_are_ascii_digits(cli):
    code, out, err = cli("sweep", "1f1b", "--over", "M=4,٨", "-D", "P=2")  # int() reads 8
    # in -D's words (read_int); was: "expected NAME=V1,V2,...", hint "'٨' is not an integer"
    want = "--over M=4,٨: each value of 'M' must be an integer in ASCII digits, got '٨'"
    assert code == 2 and out == "" and err.splitlines() == [f"ppir: error: {want}"]
    code, _, d_err = cli("compile", "1f1b", "-D", "P=2", "-D", "M=٨")
    assert code == 2 and "'M' must be an integer in ASCII digits, got '٨'" in d_err


@pytest.mark.parametrize("layers", ["0", "-8"])
def test_layers_below_one_are_refused_as_analyze_refuses_them(cli, layers):
    argv = ["1f1b", "-D", "P=4", "--layers", layers]
    code, _, analyze_err = cli("analyze", *argv)
    assert code == 2
    code, out, err = cli("sweep", *argv[:1], "--over", "M=4,8", *argv[1:])
    assert code == 2 and out == ""  # was: "vs 0 n/a", "vs -2 n/a"
    assert err == analyze_err == f"ppir: error: --layers must be a positive integer, got {layers}\n"


def test_sweep_help_says_what_schedules_and_the_model_options_take(cli, capsys):
    from ppir.cli.common import SCHEDULE_HELP

    with pytest.raises(SystemExit):
        cli("sweep", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert " ".join(SCHEDULE_HELP.split()) in text  # as 'ppir check': CSV, JSON, torch:NAME
    assert "model shape for bytes" not in text and "no bytes" in text
    # what --model and --recompute do change: peak A where the backward is split into I and W
    base = ["sweep", "zb_h1", "--over", "M=4,8", "-D", "P=4", "--format", "json"]
    peaks = {
        r: [
            row["measured"]["peak A"] for row in json.loads(cli(*base, "--recompute", r)[1])["rows"]
        ]
        for r in ("none", "selective")
    }
    assert peaks["none"] != peaks["selective"]
    model = json.loads(cli(*base, "--model", "llama3-8b")[1])["rows"][0]["measured"]
    assert model["layers/chunk"] == 8  # 32 layers over 4 stages


def test_placement_with_a_pps_file_is_one_usage_error_not_a_row_per_value(cli):
    code, out, err = cli("sweep", "1f1b", "--over", "M=4,8", "--placement", "0,1,2,3")
    assert (
        code == 2 and "--placement applies to CSV and torch:NAME schedules only" in err and not out
    )


def test_est_bubble_ideal_is_the_worst_ranks_ratio_as_bubble_ideal_is(cli, tmp_path):
    """On ranks with unequal work (stages 0 and 1 on rank 0, stage 2 on rank 1) the estimate's
    column was the mean over ranks (sum idle / sum busy = 0.5) beside the compute graph's worst
    rank (10 idle / 8 busy = 1.25), as if the lowered program beat its own compute order."""
    src = tmp_path / "imb.pps"
    src.write_text(UNEQUAL_RANKS)
    code, out, err = cli("sweep", str(src), "--over", "M=4", "--format", "json")
    assert code == 0, err
    (row,) = json.loads(out)["rows"]
    assert row["measured"]["bubble/ideal"] == 1.25
    assert row["measured"]["est bubble/ideal"] == 1.25


@pytest.mark.parametrize(
    "schedule, over, fixed",
    [
        ("1f1b", "M=4,8", ["-D", "P=4"]),
        ("interleaved_1f1b", "v=1,2", ["-D", "P=4", "-D", "M=8"]),
        ("zb_h1", "P=2,4", ["-D", "M=8"]),
        ("dualpipev", "M=8", ["-D", "P=4"]),
    ],
)
def test_the_step_time_is_compiles(cli, schedule, over, fixed):
    """sweep reported bubbles and peak memory but no step time; it is now the figure 'ppir
    compile --backend cost' prints for the same parameters (the same compile, not a formula)."""
    code, out, err = cli("sweep", schedule, "--over", over, *fixed, "--format", "json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    name = over.partition("=")[0]
    for row in rows:
        code, est, err = cli("compile", schedule, *fixed, "-D", f"{name}={row['value']}",
                             "--format", "json")  # fmt: skip
        assert code == 0, err
        assert row["measured"]["step time"] == json.loads(est)["step_time"]
    code, text, _ = cli("sweep", schedule, "--over", over, *fixed)
    lines = text.splitlines()
    end = lines[3].index("  step time  ") + len("  step time")  # right-aligned cells end here
    step = [line[:end].split()[-1] for line in lines[4 : 4 + len(rows)]]
    assert step == [fmt(r["measured"]["step time"]) for r in rows]


def test_the_headline_names_the_parameters_the_rows_do_not_show(cli):
    # was: '1f1b: sweeping M', with the P the schedule's default put in (4) said nowhere
    code, out, err = cli("sweep", "1f1b", "--over", "M=4,8")
    assert code == 0, err
    assert out.startswith("1f1b(P=4): sweeping M; ")
    # -D values and defaults that stay put; N = P's default moves with P, so it is not one
    code, out, _ = cli("sweep", "interleaved_1f1b", "--over", "v=1,2", "-D", "P=2", "-D", "M=4")
    assert out.startswith("interleaved_1f1b(P=2, M=4, N=2): sweeping v; ")
    code, out, _ = cli("sweep", "interleaved_1f1b", "--over", "P=2,4", "-D", "M=8")
    assert out.startswith("interleaved_1f1b(M=8, v=2): sweeping P; ")
    # an error row's parameters count too (they are resolved from the header)
    code, out, _ = cli("sweep", "1f1b", "--over", "M=0,4", "-D", "P=2")
    assert code == 1 and out.startswith("1f1b(P=2): sweeping M; ")
    # a file is named as 'ppir compile' names it: by its schedule (was the path)
    code, out, _ = cli("sweep", str(EXAMPLES / "my_schedule.pps"), "--over", "M=4,8", "-D", "P=4")
    assert code == 0 and out.startswith("my_schedule(P=4): sweeping M; ")


def test_the_text_says_its_bubble_is_the_worst_ranks_not_compiles_mean(cli, tmp_path):
    # was: 1.25 beside 'ppir compile''s 'bubble / ideal 50.00%' for the same program, with
    # nothing in the text saying that one is the worst rank's and the other the mean
    src = tmp_path / "imb.pps"
    src.write_text(UNEQUAL_RANKS)
    code, out, err = cli("sweep", str(src), "--over", "M=4")
    assert code == 0, err
    assert out.splitlines()[1].endswith(
        "est bubble/ideal: the cost estimator running the lowered program; each of the rank "
        "that idles most ('ppir compile' gives the mean over ranks)"
    )
    assert re.search(r"\n4 +1\.25 ", out)
    code, out, _ = cli("compile", str(src), "--backend", "cost")
    assert code == 0 and re.search(r"bubble / ideal +50\.00%", out)


@pytest.mark.parametrize("command", ["sweep", "viz", "dump", "check"])
def test_placement_help_names_the_schedules_it_applies_to(cli, capsys, command):
    # was: 'for CSV schedules', while torch:NAME takes it too (and a .pps file is refused:
    # '--placement applies to CSV and torch:NAME schedules only')
    with pytest.raises(SystemExit):
        cli(command, "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "--placement R0,R1,... for CSV and torch:NAME schedules: the rank of each stage "
        "(default: inferred from where each stage computes, or torch's own)"
    ) in text


def test_torch_classes_of_a_schedule_get_its_closed_forms(cli):
    # was: '(no closed forms on record for this schedule)' for torch:GPipe, torch:Interleaved1F1B
    pytest.importorskip("torch")
    code, out, err = cli("sweep", "torch:GPipe", "--over", "M=2,4", "-D", "P=2")
    assert code == 0, err
    assert "bubble/total  (P-1)/(M+P-1)  [Huang 2019]" in out and "M=4: 0.2 vs 0.2 ok" in out
    code, out, err = cli(
        "sweep", "torch:Interleaved1F1B", "--over", "v=1,2", "-D", "P=4", "-D", "M=8", "--format",
        "json",
    )  # fmt: skip
    assert code == 0, err
    rows = json.loads(out)["rows"]
    forms = {(p["formula"], p["agrees"]) for r in rows for p in r["predictions"]}
    assert ("(P-1)/(v*M)", True) in forms and ("(v*P+P-1)/v", True) in forms
    assert ("P*(v+1)/2", False) in forms  # the shortcut differs here as for ppir's own


def test_a_range_sweeps_every_integer_in_it(cli):
    """--over M=2..5 was refused ("each value of 'M' must be an integer, got '2..5'", hint
    "sweep lists its values") where fuzz takes ranges: now it is M=2,3,4,5, both ends in."""
    code, ranged, err = cli("sweep", "1f1b", "--over", "M=2..5", "-D", "P=2", "--format", "json")
    assert code == 0, err
    assert [r["value"] for r in json.loads(ranged)["rows"]] == [2, 3, 4, 5]
    listed = cli("sweep", "1f1b", "--over", "M=2,3,4,5", "-D", "P=2", "--format", "json")[1]
    assert json.loads(ranged)["rows"] == json.loads(listed)["rows"]
    assert cli("sweep", "1f1b", "--over", "M=3..3", "-D", "P=2")[0] == 0  # one value


@pytest.mark.parametrize(
    "over, lines",
    [
        (
            "M=P..8P",  # fuzz's bounds over parameters: sweep has no P to evaluate them with
            [
                "ppir: error: --over M=P..8P: a range's ends must be integers here, not "
                "expressions of 'P'",
                "hint: e.g. --over M=4..12 (every value, inclusive at both ends); 'ppir fuzz' "
                "takes ranges over other parameters (--over P=2..8 --over M=P..8P)",
            ],
        ),
        (
            "M=8..4",  # in fuzz's words (ppir.testing.space.parse_domain)
            [
                "ppir: error: --over M=8..4 is empty: ranges run from the low end up, "
                "inclusive at both ends",
                "hint: did you mean 4..8?",
            ],
        ),
        (
            "M=1..5000",
            [
                "ppir: error: --over M=1..5000 gives 5,000 values; a sweep measures at most "
                "1,000 (a row each)",
                "hint: narrow the range or list the values, e.g. --over M=4,8,16",
            ],
        ),
        (
            "M=" + ",".join(map(str, range(1, 1002))),
            [
                "ppir: error: --over M=" + ",".join(map(str, range(1, 1002))) + " gives "
                "1,001 values; a sweep measures at most 1,000 (a row each)",
                "hint: narrow the range or list the values, e.g. --over M=4,8,16",
            ],
        ),
        (
            "M=4..8,16",  # was: "'8,16' is not a bound expression", hinting at 8P and P//2
            [
                "ppir: error: --over M=4..8,16: a range and a list of values cannot be mixed",
                "hint: a range is LO..HI alone (every value from LO to HI, e.g. 2..16); a list "
                "gives each value, e.g. 1,2,4",
            ],
        ),
    ],
    ids=["over-parameters", "wrong-way-round", "range-too-wide", "list-too-long", "mixed"],
)
def test_a_range_sweep_cannot_list_is_refused_naming_it(cli, over, lines):
    code, out, err = cli("sweep", "1f1b", "--over", over, "-D", "P=2")
    assert code == 2 and out == "" and err.splitlines() == lines


@pytest.mark.parametrize(
    "over", ["P=99999999999999999999", "P=99999999999999999998..99999999999999999999"]
)
def test_a_swept_value_past_ppirs_integers_names_over(cli, over):
    """It said '-D P=<a 21-digit number>: out of range', naming a -D the command line did
    not give."""
    code, out, err = cli("sweep", "1f1b", "--over", over, "-D", "M=4")
    assert code == 2 and err == (
        "ppir: error: --over P=<a 21-digit number>: out of range (ppir integers are at most "
        "2**63 - 1)\n"
    )
