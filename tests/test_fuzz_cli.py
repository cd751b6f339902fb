"""ppir fuzz: exit codes, nothing on stderr when piped, shrinking to the smallest failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppir.diagnostics import PpirError
from ppir.testing import CheckResult, ParamSpace
from ppir.testing.search import search

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_a_good_schedule_passes(cli):
    code, out, err = cli(
        "fuzz",
        "1f1b",
        "--over",
        "P=2..5",
        "--over",
        "M=P..3P",
        "--max-peak",
        "P",
        "--examples",
        "12",
    )
    assert code == 0, err
    assert out.startswith(
        "ok: 1f1b: 12 parameter choices hold (verifies, peak <= P) for P in 2..5, M in P..3P"
    )
    assert err == ""  # no progress when stderr is not a terminal (tests/test_output.py: a tty)


def test_the_summary_says_which_values_were_checked(cli):
    """'--over P=2..8 --over M=P..4' checked P = 2..4 only (M=P..4 is empty above), and said
    '6 parameter choices hold ... for P in 2..8', as if P = 8 had been verified."""
    code, out, err = cli("fuzz", "1f1b", "--over", "P=2..8", "--over", "M=P..4")
    assert code == 0, err
    assert out.strip() == (
        "ok: 1f1b: 6 parameter choices hold (verifies) for P in 2..8, M in P..4 (checked P 2..4)"
    )


def test_the_known_bad_example_shrinks_to_the_smallest_failure(cli):
    code, out, err = cli(
        "fuzz",
        str(EXAMPLES / "bad_schedule.pps"),
        "--over",
        "P=2..16",
        "--over",
        "M=P..8P",
        "--max-peak",
        "P",
        "--examples",
        "50",
    )
    assert code == 1
    first, second = out.splitlines()[:2]
    # the low corner (P=2, M=2) holds; the high corner fails and shrinks
    assert first.startswith(f"FAILED: {EXAMPLES / 'bad_schedule.pps'} with P=2, M=3 (shrunk in ")
    assert "from P=16, M=128" in first
    assert second == "peak activations 3 A on rank 0 (at 0F2) exceed the bound 2 A ('P')"
    assert err == ""


def test_requires_are_respected_and_counted(cli):
    code, out, _ = cli(
        "fuzz",
        "interleaved_1f1b",
        "--over",
        "P=2..4",
        "--over",
        "M=P..2P",
        "--over",
        "v=1,2",
        "--examples",
        "8",
        "-q",
    )
    assert code == 0
    assert "8 parameter choices hold" in out and "rejected by require lines" in out


def test_bubble_bound(cli):
    code, out, _ = cli(
        "fuzz",
        "1f1b",
        "--over",
        "P=2..4",
        "--over",
        "M=P..2P",
        "--max-bubble",
        "(P-1)/M",
        "--examples",
        "6",
        "-q",
    )
    assert code == 0, out
    code, out, _ = cli(
        "fuzz",
        "1f1b",
        "--over",
        "P=2..4",
        "--over",
        "M=P..2P",
        "--max-bubble",
        "(P-1)/(2M)",
        "--examples",
        "6",
        "-q",
    )
    assert code == 1 and "with P=2, M=2" in out and "bubble/ideal 0.5 exceeds" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["1f1b"], "give at least one --over"),
        (["1f1b", "--over", "P=2.."], "a range needs both ends"),
        (["1f1b", "--over", "P=2...4"], "--over P=2...4: a range is LO..HI, with two dots"),
        (["1f1b", "--over", "P=2..4..6"], "--over P=2..4..6: a range is LO..HI, with two dots"),
        # was: "cannot read the expression ''", naming neither the option nor the value
        (["1f1b", "--over", "P="], "ppir: error: --over P=: no values after '='\nhint: e.g."),
        (
            ["1f1b", "--over", "P=1,2,,4"],
            "ppir: error: --over P=1,2,,4 has an empty value\nhint: sep",
        ),
        (["1f1b", "--over", "M=P..8P", "--over", "P=2..4"], "refers to 'P'"),
        # was "declare 'P' before 'M'", which reads as the schedule's header, not the options
        (
            ["1f1b", "--over", "M=P..8P", "--over", "P=2..4"],
            "hint: give --over P=... before --over M=P..8P",
        ),
        # was: "'Q' is not a parameter of 1f1b", in words of its own
        (
            ["1f1b", "--over", "Q=1..2"],
            "ppir: error: unknown parameter 'Q' (--over Q='1..2') for schedule '1f1b'",
        ),
        (
            ["1f1b", "--over", "P=2..3", "-D", "Q=4"],
            "ppir: error: unknown parameter 'Q' (-D Q=4) for schedule '1f1b'\nhint: its parameters",
        ),
        (["1f1b", "--over", "P=2..3", "--max-peak", "P +"], "cannot read the expression"),
        (
            ["1f1b", "--over", "P=2..3", "--max-peak", "2Q"],
            "--max-peak '2Q' refers to 'Q', which is not a parameter of 1f1b",
        ),
        (["1f1b", "--over", "P=2..3", "--max-bubble", "1/m"], "its parameters: P, M"),
        (["nosuch.pps", "--over", "P=1..2"], "no such file"),
        (["interleaved_1f1b", "--over", "P=4", "--over", "M=5..7"], "satisfies the require lines"),
        (["torch:GPipe", "--over", "M=2..4"], "torch's schedule classes cannot be checked over"),
    ],
)
def test_usage_mistakes_exit_2_without_traceback(cli, argv, message):
    code, out, err = cli("fuzz", *argv)
    assert code == 2
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "over, first",
    [  # each was the option, then its value again: "--over M=4,4: '4,4' lists 4 twice"
        ("M=4,4", "--over M=4,4 lists 4 twice"),
        ("M=1,,2", "--over M=1,,2 has an empty value"),
        (
            "M=4..2",
            "--over M=4..2 is empty: ranges run from the low end up, inclusive at both ends",
        ),
        ("M=1..", "--over M=1..: a range needs both ends, e.g. 2..16"),
        ("M=a+", "--over M=a+: cannot read the expression"),  # was: ... the expression 'a+'
        ("M=foo(1)", "--over M=foo(1) is not a bound expression"),
        ("M=1.5", "--over M=1.5 is not an integer: a parameter's values are integers"),
        # was: "the domain of 'M' (a) refers to 'a'", naming no option
        ("M=a", "--over M=a names no parameter given before it"),
        ("M=1..x", "--over M=1..x refers to 'x'"),  # was: "the domain of 'M' (1..x) refers..."
        ("M=1,1.5", "--over M=1,1.5: '1.5' is not an integer: a parameter's values are integers"),
        ("M=P..2*", "--over M=P..2*: cannot read the expression '2*'"),  # a part: named
        # was: "'8,16' is not a bound expression", with a hint at expressions (8P, P//2)
        ("M=4..8,16", "--over M=4..8,16: a range and a list of values cannot be mixed"),
        ("M=1,4..8", "--over M=1,4..8: a range and a list of values cannot be mixed"),
        ("M=4..8,", "--over M=4..8, has an empty value"),  # as 'M=4,8,' (was: "mixed")
    ],
)
def test_an_over_error_names_the_option_and_its_value_once(cli, over, first):
    code, out, err = cli("fuzz", "1f1b", "--over", "P=2..3", "--over", over)
    assert code == 2 and out == "" and err.splitlines()[0] == f"ppir: error: {first}"


@pytest.mark.parametrize("over", ["M=", "M= "])
def test_sweep_and_fuzz_refuse_an_over_without_values_in_one_wording(cli, over):
    """sweep said "--over M=: expected NAME=V1,V2,..., e.g. --over v=1,2,4" where fuzz said
    "--over M=: no values after '='": one check (value_lists.split_option), one wording."""
    want = f"ppir: error: --over {over}: no values after '='"
    code, _, err = cli("sweep", "1f1b", "-D", "P=2", "--over", over)
    assert code == 2 and err.splitlines() == [want, "hint: e.g. --over M=1,2,4"]
    code, _, err = cli("fuzz", "1f1b", "-D", "P=2", "--over", over)
    assert code == 2 and err.splitlines() == [
        want,
        "hint: e.g. --over M=2..16, or a list of values, --over M=1,2,4",
    ]


@pytest.mark.parametrize(
    "flag, value", [("--max-ops", "0"), ("--max-ops", "-5"), ("--examples", "0")]
)
def test_counts_below_one_are_refused_naming_the_value(cli, capsys, flag, value):
    """--max-ops 0 (or -5) was taken, and every choice then skipped as over the size cap:
    'no choice in P in 2..4 is under the size cap'; refused as --examples 0 is."""
    with pytest.raises(SystemExit) as e:
        cli("fuzz", "1f1b", "--over", "P=2..4", flag, value)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err
    assert (
        err.splitlines()[-1]
        == f"ppir fuzz: error: argument {flag}: must be at least 1, got {value}"
    )


def test_a_syntax_error_exits_2(cli, tmp_path):
    bad = tmp_path / "bad.pps"
    bad.write_text("schedule bad(P = 2)\nranks (\n")
    code, _, err = cli("fuzz", str(bad), "--over", "P=1..2")
    assert code == 2 and "error: unexpected" in err


# ------------------------------------------------------------------ the search itself
def _fake(fails):
    def check(params):
        r = CheckResult("fake", dict(params))
        if fails(params):
            r.fail("boom")
        return r

    return check


@pytest.mark.parametrize(
    "fails, smallest",
    [
        (lambda p: p["M"] > p["P"], {"P": 2, "M": 3}),
        (lambda p: p["P"] >= 7 and p["M"] % 5 == 0, {"P": 7, "M": 10}),
        (lambda p: p["P"] * p["M"] >= 200, {"P": 5, "M": 40}),  # M <= 8P: P >= 5
        (lambda p: p["P"] >= 3 and p["M"] <= p["P"], {"P": 3, "M": 3}),  # both lowered at once
    ],
)
def test_search_shrinks_to_a_minimal_failing_point(fails, smallest):
    space = ParamSpace.from_specs({"P": "2..16", "M": "P..8P"})
    res = search(space, _fake(fails), examples=200, seed=1)
    assert res.failure is not None and res.failure.params == smallest


@pytest.mark.parametrize("threshold", [37, 26, 61, 1001])
def test_a_threshold_beyond_the_scan_is_found_exactly(threshold):
    # the ladder above the first 24 values stopped at its next rung (50 for 37); bisection
    # between the last passing rung and the failing value finds the threshold itself
    space = ParamSpace.from_specs({"P": "2..5000"})
    res = search(space, _fake(lambda p: p["P"] >= threshold), examples=50, seed=3)
    assert res.failure is not None and res.failure.params == {"P": threshold}


def test_choices_over_the_size_cap_are_skipped_not_failed(cli):
    # 1F1B at P = M needs 2 P^2 ops: over 20,000 from P = 101 on
    code, out, err = cli(
        "fuzz", "1f1b", "--over", "P=2..400", "--over", "M=P..P", "--max-ops", "20000",
        "--examples", "10",
    )  # fmt: skip
    assert code == 0, out + err
    assert "10 parameter choices hold" in out and "over the size cap, not checked" in out
    code, out, err = cli(
        "fuzz", "1f1b", "--over", "P=200..400", "--over", "M=P..P", "--max-ops", "20000"
    )
    assert code == 2 and "is under the size cap (--max-ops)" in err


def test_search_is_deterministic_and_counts_distinct_points():
    space = ParamSpace.from_specs({"P": "1..3", "M": [1, 2]})
    a = search(space, _fake(lambda p: False), examples=100, seed=5)
    assert a.failure is None and a.checked == 6  # the whole space, each point once
    b = search(space, _fake(lambda p: False), examples=4, seed=5)
    assert list(b.cache) == list(search(space, _fake(lambda p: False), examples=4, seed=5).cache)


def test_a_range_written_the_wrong_way_is_refused(cli):
    code, _, err = cli("fuzz", "1f1b", "--over", "P=5..2")
    assert code == 2 and "--over P=5..2 is empty" in err and "did you mean 2..5?" in err
    from ppir.testing.space import parse_domain

    with pytest.raises(PpirError, match="is empty"):
        parse_domain("5..2")
    assert parse_domain("2..2").values({}) == [2]  # one value
    assert parse_domain("P..2").values({"P": 3}) == []  # a range that depends: may be empty


def test_a_decimal_bound_is_exact(cli):
    code, out, err = cli(
        "fuzz", "1f1b", "--over", "P=2..6", "--over", "M=P..3P", "--max-bubble", "0.5"
    )
    assert code == 1 and "FAILED: 1f1b with P=3, M=3" in out, err
    assert "exceeds the bound 1/2 (= 0.5)" in out


def test_a_bound_with_an_exponent_is_one_number(cli):
    """1e3 was read as 1 times a name e3: '--over M=1e3..3' said "the domain of 'M' (1e3..3)
    refers to 'e3'", '--max-step-time 1e3' "refers to 'e3', which is not a parameter"."""
    code, _, err = cli("fuzz", "1f1b", "--over", "P=2..3", "--over", "M=1e3..3")
    assert code == 2 and err.splitlines() == [
        "ppir: error: --over M=1e3..3: '1e3' is not an integer: a parameter's values are integers",
        "hint: write it as 1000",
    ]
    code, out, err = cli("fuzz", "1f1b", "--over", "P=2..3", "--max-step-time", "1e3")
    assert code == 0 and "step time <= 1e3" in out, err
    code, out, err = cli("fuzz", "1f1b", "--over", "P=2..3", "--max-step-time", "2e1")
    assert code == 1 and "exceeds the bound 20 ('2e1')" in out, err


def test_a_repeated_error_is_shown_once_with_its_repeats(tmp_path):
    from ppir.testing import check_schedule

    bad = tmp_path / "bad.pps"  # every rank's backward of each microbatch before its forward
    bad.write_text(
        "schedule bad(P = 2, M = 4)\nranks P\nstages P\nmicrobatches M\nplacement looped\n"
        "program r {\n  for i in 0 .. M {\n    B(i)\n    F(i)\n  }\n}\n"
    )
    res = check_schedule(str(bad), P=2, M=4)
    assert res.status == "failed"
    text = "\n".join(res.failures)
    assert text.count("error:") == 1 and "note: the same error for" in text, text


def test_empty_ranges_are_not_blamed_on_the_size_cap(cli):
    code, _, err = cli("fuzz", "1f1b", "--over", "P=2..4", "--over", "M=2P..P")
    assert code == 2 and "under the size cap" not in err, err


def test_a_value_list_splits_at_top_level_commas_only(cli):
    from ppir.testing.space import parse_domain
    from ppir.testing.value_lists import split_values

    assert split_values("min(P,3),2P") == ["min(P,3)", "2P"]
    assert split_values("1,2,4") == ["1", "2", "4"]
    assert parse_domain("max(1,min(P,3)),8").values({"P": 2}) == [2, 8]
    # was: "cannot read the expression 'min(P'"
    code, out, err = cli("fuzz", "1f1b", "--over", "P=2..3", "--over", "M=min(P,3)", "-q")
    assert code == 0 and "M in min(P,3)" in out, err
    code, out, err = cli("fuzz", "1f1b", "--over", "P=2..3", "--over", "M=min(P,3)..max(P,4)")
    assert code == 0 and "M in min(P,3)..max(P,4)" in out, err
    code, _, err = cli("fuzz", "1f1b", "--over", "P=2..3", "--over", "M=min(P,3")
    assert code == 2 and "--over M=min(P,3: cannot read the expression\n" in err


def test_no_valid_choice_names_the_require_line_that_refuses(cli):
    code, _, err = cli("fuzz", "interleaved_1f1b", "--over", "P=4", "--over", "M=5..7")
    assert code == 2 and "satisfies the require lines of interleaved_1f1b" in err
    assert "hint: with P=4, M=5: <builtin>/interleaved_1f1b.pps:13:9: requirement failed" in err


def test_a_failure_names_the_values_it_did_not_draw(cli):
    """The FAILED line gave only the --over values: the -D values and the schedule's defaults
    it also ran with were not shown, so the line was not enough to rerun the failure."""
    code, out, _ = cli(
        "fuzz", "interleaved_1f1b", "--over", "P=2..4", "-D", "M=8", "--max-peak", "M/2",
        "--quiet",
    )  # fmt: skip
    assert code == 1
    assert out.splitlines()[0] == (
        "FAILED: interleaved_1f1b with P=4 (M=8, v=2 fixed; N=4 by its default P; shrunk in 0 "
        "steps from P=4; 2 choices checked)"
    )


def test_a_default_expression_is_not_called_fixed(cli):
    """N = P followed P through the search, but the FAILED line called it 'N=4 fixed'; given
    with -D it is held, and then it is fixed."""
    argv = ("fuzz", "interleaved_1f1b", "--over", "P=2..4", "-D", "M=8", "--max-peak", "M/2")
    code, out, _ = cli(*argv, "-D", "N=4", "--quiet")
    assert code == 1 and "(M=8, v=2, N=4 fixed; shrunk in" in out.splitlines()[0]


@pytest.mark.parametrize(
    "argv, message, hint",
    [
        (
            ["--over", "P=2..4", "-D", "P=3"],
            "--over P=2..4: 'P' is also given with -D P=3",
            "give P once: --over to draw it, or -D to fix it",
        ),
        (
            ["--over", "P=2..4", "--over", "M=2", "--over", "P=3..5"],
            "--over P=3..5: 'P' is given twice (--over P=2..4, then --over P=3..5)",
            "one --over per parameter: a list of values is P=2,4,8",
        ),
    ],
)
def test_a_parameter_given_twice_names_both_flags(cli, argv, message, hint):
    """Both were 'parameter 'P' is given twice', without saying where the two came from."""
    code, out, err = cli("fuzz", "1f1b", *argv)
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"ppir: error: {message}", f"hint: {hint}"]


@pytest.mark.parametrize("suffix,kind", [(".csv", "a CSV schedule"), (".json", "a JSON program")])
def test_fuzzing_a_fixed_program_points_at_check(cli, tmp_path, suffix, kind):
    # was: "'P' is not a parameter of x.csv" with the hint 'its parameters: none'
    f = tmp_path / f"x{suffix}"
    if suffix == ".csv":
        f.write_text("0F0,0B0\n1F0,1B0\n")
    else:
        f.write_text(cli("dump", "1f1b", "-D", "P=2", "-D", "M=2", "--format", "json")[1])
    code, out, err = cli("fuzz", str(f), "--over", "P=2..4")
    assert (code, out) == (2, "")
    assert err == (
        f"ppir: error: unknown parameter 'P' (--over P='2..4') for {f}\n"
        f"hint: {kind} takes no parameters: it is one fixed program\n"
        f"hint: 'ppir check {f}' checks it\n"
    )


def test_a_value_is_read_as_dash_d_and_sweep_read_it(cli):
    """One integer reading rule (ppir.frontend.limits.read_int) for -D, sweep's --over and
    fuzz's --over: fuzz said "cannot read the expression '04'", hinting at '0.5', which a
    parameter's values cannot be; and took '٤' for no expression instead of no ASCII digit."""
    code, out, err = cli("fuzz", "1f1b", "--over", "P=2..3", "--over", "M=04", "-q")
    assert code == 0 and "2 parameter choices hold" in out, err
    code, out, err = cli("fuzz", "1f1b", "--over", "P=2", "--over", "M=01_0..2P+08", "-q")
    # echoed as read, as -D M=04 is M=4 (was: "M in 01_0..2P+08", "M in 04")
    assert code == 0 and "M in 10..2P+8" in out, err  # as P=2, M=10..12
    code, out, err = cli("fuzz", "1f1b", "--over", "M=04", "-D", "P=2", "-q")
    assert code == 0 and out.endswith("for M in 4\n"), err
    assert cli("sweep", "1f1b", "-D", "P=2", "--over", "M=04")[0] == 0
    assert cli("compile", "1f1b", "-D", "P=2", "-D", "M=04")[0] == 0
    # each led by the option as given, as sweep's are (was: no option named)
    code, _, err = cli("fuzz", "1f1b", "--over", "P=2..3", "--over", "M=P..2P+٤")
    assert code == 2 and err.splitlines() == [
        "ppir: error: --over M=P..2P+٤: a number in '2P+٤' must be an integer in ASCII digits, "
        "got '٤'"
    ]
    code, _, err = cli("fuzz", "1f1b", "--over", "P=2..3", "--over", "M=٤")
    assert code == 2 and err.splitlines() == [
        "ppir: error: --over M=٤: a number must be an integer in ASCII digits, got '٤'"
    ]
    code, _, err = cli("fuzz", "1f1b", "--over", "P=2..3", "--over", "M=P..2*")
    assert code == 2 and err.splitlines() == [
        "ppir: error: --over M=P..2*: cannot read the expression '2*'",
        "hint: use integers, names, + - * // % /, min(), max(); e.g. 8P, 2*P-1 or P//2",
    ]
    # a bound is a number, not a parameter's value: it may be 0.5
    code, _, err = cli("fuzz", "1f1b", "--over", "P=2..3", "--max-bubble", "0.5*")
    assert code == 2 and err.splitlines()[1].endswith("e.g. 8P, 2*P-1 or 0.5")


def test_a_bound_that_divides_by_zero_names_the_choice(cli):
    """It said only "division by zero in '(P-1)/(M-8)'", not at which values."""
    code, _, err = cli(
        "fuzz", "1f1b", "--over", "P=2..4", "--over", "M=8..9", "--max-bubble", "(P-1)/(M-8)"
    )
    assert code == 2 and err == "ppir: error: division by zero in '(P-1)/(M-8)' at M=8, P=2\n"


def test_a_parameter_without_default_names_this_commands_options(cli, tmp_path):
    """fuzz over P of a schedule whose M has no default said "give it with M=..." (the Python
    API's words) at the first check; now before any check, naming --over and -D."""
    f = tmp_path / "nd.pps"
    f.write_text("schedule nd(P = 4, M)\nranks P\nmicrobatches M\nprogram r { F(0) B(0) }\n")
    code, out, err = cli("fuzz", str(f), "--over", "P=2..4")
    assert code == 2 and out == ""
    assert err.splitlines()[0] == (
        f"{f}:1:20: error: parameter 'M' has no default; give it with --over M=... or -D M=..."
    )


@pytest.mark.parametrize("flag", ["--max-peak", "--max-bubble", "--max-step-time"])
def test_a_bound_past_the_range_of_a_float_is_one_line_naming_it(cli, flag):
    """``--max-bubble 1e400`` (read as infinity) ended in a traceback from Fraction('inf'),
    naming neither the option nor the value."""
    code, out, err = cli("fuzz", "1f1b", "--over", "P=2..3", f"{flag}=1e400")
    assert code == 2 and not out
    assert (
        err
        == f"ppir: error: {flag} '1e400' holds a number past 1.8e308, the largest a float holds\n"
    )


@pytest.mark.parametrize(
    "bound, code, said",
    [("1e308*10", 0, "ok: 1f1b: 2 parameter choices hold"), ("-1e308*10", 1, "bound -inf")],
)
def test_a_bound_that_overflows_a_float_compares_past_every_value(cli, bound, code, said):
    """``--max-peak 1e308*10`` (an exact number too large for a float) ended in a traceback
    from comparing it with the float tolerance (OverflowError)."""
    got, out, err = cli("fuzz", "1f1b", "--over", "P=2..3", f"--max-peak={bound}")
    assert got == code and said in out and "Traceback" not in err


def test_a_space_smaller_than_examples_ends_once_used_up(cli, monkeypatch):
    """``--over P=2..4 --examples 10**20`` never ended: the search drew 20 x examples points
    from a space of 3.  It stops after 1,000 draws in a row that find nothing new."""
    import ppir.testing.search as search_mod

    draws = []
    complete = search_mod._complete
    monkeypatch.setattr(search_mod, "_complete", lambda *a: draws.append(1) or complete(*a))
    code, out, err = cli("fuzz", "1f1b", "--over", "P=2..4", "--examples", "10000")
    assert code == 0 and out.startswith("ok: 1f1b: 3 parameter choices hold"), (out, err)
    assert len(draws) <= 3 + search_mod._EXHAUSTED + 10, len(draws)  # was 200,002
