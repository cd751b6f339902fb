"""ppir.testing: parameter specs, the shape strategy, assert_schedule_ok and the pytest plugin."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppir.diagnostics import PpirError
from ppir.testing import (
    ParamSpace,
    assert_schedule_ok,
    check_schedule,
    parse_domain,
    property_test,
    shapes,
)
from ppir.testing.space import Expr

ROOT = Path(__file__).resolve().parent.parent
CYCLIC = """schedule cyclic()
ranks 2
microbatches 1
rank 0: 0B0 0F0
rank 1: 1F0 1B0
"""


# ------------------------------------------------------------------ parameter specs
@pytest.mark.parametrize(
    "text, env, value",
    [
        ("8P", {"P": 3}, 24),
        ("2(P-1)", {"P": 4}, 6),
        ("P*v + 1", {"P": 2, "v": 3}, 7),
        ("max(P, 2) // 2", {"P": 5}, 2),
        ("(P-1)/M", {"P": 4, "M": 6}, Fraction(1, 2)),
        ("-3 % P", {"P": 4}, 1),
        ("6/3", {}, 2),
        # a number with an exponent is one literal (was 1 times a name 'e3'), then multiplies
        ("1e3", {}, 1000),
        ("2.5e-1P", {"P": 4}, 1),
        ("1E+2 // P", {"P": 3}, 33),
        ("v2P", {"v2P": 5}, 5),  # digits ending a name are no literal (was v2 times P)
    ],
)
def test_bound_expressions(text, env, value):
    v = Expr.parse(text).eval(env)
    assert v == value and type(v) is type(value)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("P..", "needs both ends"),
        ("__import__('os')", "not a bound expression"),
        ("P ** 2", "not a bound expression"),
        ("2 +", "cannot read"),
        ("[1]", "not a bound"),
        (range(5, 2), r"range\(5, 2\) is empty"),  # was: 'no choice in P in 5..1 satisfies...'
        (range(2, 9, -1), "is empty"),
        # was: "cannot read the expression ''" for both
        (" ", "an empty domain: it holds no value"),
        ("1,2,,4", "'1,2,,4' has an empty value"),
        # was: drawn as one choice, the list shown as given ('P in 2,2')
        ("2,4,2", "'2,4,2' lists 2 twice"),
        ("P, 2P,P", "'P, 2P,P' lists P twice"),
        ([1, 2, 1], r"\[1, 2, 1\] lists 1 twice"),
    ],
)
def test_bad_specs_are_diagnostics(spec, message):
    with pytest.raises(PpirError, match=message) as e:
        parse_domain(spec)
    assert e.value.kind == "bad-range" and e.value.exit_code == 2


@pytest.mark.parametrize(
    "spec, message, hint",
    [
        # was: "the domain of 'M' (1e3..3) refers to 'e3'"
        ("1e3..3", "'1e3' is not an integer: a parameter's values are integers", "as 1000"),
        ("P..1e3", "'1e3' is not an integer", "as 1000"),
        ("2.0..4", "'2.0' is not an integer", "as 2"),  # was: taken as 2, shown as 'M in 2.0..4'
        ("1,2.5", "'2.5' is not an integer", "P//2"),
        ("P*0.5..P", "'0.5' in 'P\\*0.5' is not an integer", "P//2"),
        ([2.0, 4], "'2.0' is not an integer", "as 2"),
    ],
)
def test_a_bound_that_is_no_integer_is_refused_naming_it(spec, message, hint):
    with pytest.raises(PpirError, match=message) as e:
        parse_domain(spec)
    assert e.value.kind == "bad-range" and hint in e.value.diagnostics[0].hints[0]


def test_domains_read_earlier_parameters_only():
    space = ParamSpace.from_specs({"P": "2..4", "M": "P..8P", "v": [1, 2]}, {"Q": 1})
    dom = dict(space.domains)
    assert dom["M"].bounds({"P": 3}) == (3, 24)
    assert dom["v"].values({}) == [1, 2]
    assert parse_domain(range(2, 9, 2)).values({}) == [2, 4, 6, 8]
    assert parse_domain(range(1, 5)).bounds({}) == (1, 4)
    with pytest.raises(PpirError, match="the domain of 'M' \\(P..8P\\) refers to 'P'") as e:
        ParamSpace.from_specs({"M": "P..8P", "P": "2..4"})
    assert "hint: declare 'P' before 'M'" in e.value.render()
    with pytest.raises(PpirError, match="the domain of 'M' \\(P..4p\\) refers to 'p'") as e:
        ParamSpace.from_specs({"P": "2..6", "M": "P..4p"})  # a name in the wrong case
    assert "hint: did you mean 'P'?" in e.value.render()
    with pytest.raises(PpirError, match="'P/2' is 3/2, not an integer"):
        parse_domain("1..P/2").bounds({"P": 3})


# ------------------------------------------------------------------ shapes
@settings(max_examples=40)
@given(shapes("interleaved_1f1b", P="1..4", M="P..4P", v=[1, 2, 4]))
def test_shapes_stay_in_bounds_and_satisfy_requires(params):
    assert set(params) == {"P", "M", "v"}
    P, M = params["P"], params["M"]
    assert 1 <= P <= 4 and P <= M <= 4 * P and params["v"] in (1, 2, 4)
    assert M % P == 0  # Megatron's rule at the default group size N = P


@settings(max_examples=10)
@given(shapes("1f1b", M="2..3"))
def test_unnamed_parameters_keep_their_defaults(params):
    assert set(params) == {"M"}
    assert check_schedule("1f1b", **params).params == {"P": 4, **params}


def test_a_spec_may_read_a_header_default_or_a_drawn_parameter():
    # as 'ppir fuzz 1f1b --over M=P..2P' does: P keeps its header default 4
    @settings(max_examples=10, database=None)
    @given(shapes("1f1b", M="P..2P"))
    def by_default(params):
        assert set(params) == {"M"} and 4 <= params["M"] <= 8

    @settings(max_examples=10, database=None)
    @given(shapes("1f1b", P=st.integers(2, 3), M="P..2P"))
    def by_strategy(params):
        assert params["P"] in (2, 3) and params["P"] <= params["M"] <= 2 * params["P"]

    by_default()
    by_strategy()


def test_a_spec_may_not_read_a_strategy_drawn_after_it():
    with pytest.raises(PpirError, match="refers to 'P'") as e:
        shapes("1f1b", M="P..2P", P=st.integers(2, 3))
    assert "hint: declare 'P' before 'M'" in e.value.render()


def test_shapes_reject_unknown_parameters():
    with pytest.raises(PpirError) as e:  # was "'MM' is not a parameter of 1f1b"
        shapes("1f1b", MM="1..4")
    assert e.value.render().splitlines() == [
        "ppir: error: unknown parameter 'MM' (MM='1..4') for schedule '1f1b'",
        "hint: did you mean 'M'?",
        "hint: its parameters: P, M",
    ]


# ------------------------------------------------------------------ assert_schedule_ok
def test_a_good_schedule_passes_and_reports_its_figures():
    r = assert_schedule_ok(
        "1f1b",
        P=4,
        M=8,
        max_peak_activations="P",
        max_bubble="(P-1)/M",
        max_step_time=lambda p: 3 * (p["M"] + p["P"] - 1),
    )
    assert r.ok and r.peak_activations == 4
    assert r.bubble == pytest.approx(3 / 8) and r.step_time == pytest.approx(33)
    assert r.lowered.is_lowered and r.schedule.num_compute_ops == 64


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"max_peak_activations": "P - 1"},
            r"peak activations 4 A on rank 0 \(at 0F3\) exceed "
            r"the bound 3 A",
        ),
        ({"max_peak_activations": Fraction(7, 2)}, "exceed the bound 7/2"),
        ({"max_bubble": "(P-1)/M - 1/100"}, r"bubble/ideal 0\.375 exceeds the bound"),
        ({"max_step_time": 32}, "step time 33 exceeds the bound 32"),
    ],
)
def test_broken_bounds_fail_with_a_message(kwargs, message):
    with pytest.raises(AssertionError, match=message) as e:
        assert_schedule_ok("1f1b", P=4, M=8, **kwargs)
    assert str(e.value).startswith("1f1b(P=4, M=8) FAILS")


def test_a_cyclic_schedule_fails_with_the_verifier_diagnostic(tmp_path):
    path = tmp_path / "cyclic.pps"
    path.write_text(CYCLIC)
    r = check_schedule(path, max_peak_activations=1)
    assert r.status == "failed" and r.peak_activations is None  # bounds skipped
    assert r.failures[0].startswith("the verifier rejects it:\n")
    assert "0B0 on rank 0 runs before its input 0F0" in r.failures[0]
    assert "deadlock" not in r.failures[0]  # the input is checked first: no lowered echo
    with pytest.raises(AssertionError, match="cyclic\\(\\) FAILS"):
        assert_schedule_ok(str(path))


def test_expansion_errors_fail_and_require_failures_are_unsupported(tmp_path):
    r = check_schedule("interleaved_1f1b", P=4, M=6)
    assert r.status == "unsupported" and "the last group" in r.failures[0]
    with pytest.raises(AssertionError, match="is not defined"):
        assert_schedule_ok("interleaved_1f1b", P=4, M=6)
    bad = tmp_path / "oob.pps"
    bad.write_text("schedule oob(P = 2)\nranks P\nmicrobatches 1\nprogram r { F(r) B(0) }\n")
    r = check_schedule(bad)
    assert r.status == "failed" and "microbatch 1 is out of range" in r.failures[0]
    # named by its header as a schedule that expands is, not by its file ('oob.pps')
    bad.rename(tmp_path / "file_stem.pps")
    assert check_schedule(tmp_path / "file_stem.pps").name == "oob"


def test_usage_mistakes_raise_ppir_errors_not_assertions(tmp_path):
    with pytest.raises(PpirError, match="unknown parameter 'Q'"):
        check_schedule("1f1b", Q=3)
    with pytest.raises(PpirError, match="no such file"):
        check_schedule(tmp_path / "missing.pps")
    (tmp_path / "syntax.pps").write_text("ranks (\n")
    with pytest.raises(PpirError, match="unexpected"):
        check_schedule(tmp_path / "syntax.pps")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (  # was: "'Q' refers to 'Q', which has no value here", hinting at declaration order
            {"max_peak_activations": "Q"},
            "max_peak_activations 'Q' refers to 'Q', which is not a parameter of 1f1b",
        ),
        (
            {"max_bubble": "(P-1)/MM"},
            "max_bubble '(P-1)/MM' refers to 'MM', which is not a parameter of 1f1b",
        ),
        (
            {"max_step_time": 32, "max_peak_activations": "ranks*stages", "max_bubble": "2X"},
            "max_bubble '2X' refers to 'X', which is not a parameter of 1f1b",
        ),
    ],
    ids=["peak", "bubble", "among-good-bounds"],
)
def test_a_bound_naming_no_parameter_is_a_usage_error(kwargs, message):
    with pytest.raises(PpirError) as e:
        assert_schedule_ok("1f1b", P=4, M=8, **kwargs)
    assert e.value.kind == "bad-range" and e.value.message == message
    assert "hint: its parameters: P, M; also ranks, stages, microbatches" in e.value.render()
    assert ("hint: did you mean 'M'?" in e.value.render()) == ("MM" in message)


def test_a_bound_is_read_as_ppir_fuzz_reads_it_before_any_check(tmp_path, cli):
    from ppir import load_schedule

    code, _, err = cli("fuzz", "1f1b", "--over", "P=2..3", "--max-peak", "2Q")
    with pytest.raises(PpirError) as e:
        check_schedule("1f1b", max_peak_activations="2Q", P=2)
    assert code == 2 and err.strip() == e.value.render().replace(
        "max_peak_activations", "--max-peak"
    )

    path = tmp_path / "cyclic.pps"
    path.write_text(CYCLIC)  # the verifier rejects it, so no bound is evaluated: still an error
    with pytest.raises(PpirError, match="max_bubble '1/Q' refers to 'Q', which is not a parameter"):
        check_schedule(path, max_bubble="1/Q")
    with pytest.raises(PpirError) as e:  # an expanded schedule is named by its name
        check_schedule(load_schedule(path), max_step_time="Q")
    assert e.value.message.endswith("which is not a parameter of cyclic")
    assert "hint: its parameters: none; also ranks" in e.value.render()


def test_an_expanded_schedule_can_be_checked_directly():
    from ppir import load_schedule

    s = load_schedule("gpipe", {"P": 2, "M": 3})
    assert assert_schedule_ok(s, max_peak_activations="M").peak_activations == 3
    with pytest.raises(TypeError):
        check_schedule(s, P=3)


# ------------------------------------------------------------------ pytest plugin
def test_the_plugin_gives_a_fixture_and_an_examples_option(tmp_path):
    (tmp_path / "test_user.py").write_text(
        textwrap.dedent("""
        from ppir.testing import property_test

        test_prop = property_test("1f1b", over={"P": "2..3", "M": "P..2P"},
                                  max_peak_activations="P")
        test_too_tight = property_test("1f1b", over={"P": "2..3", "M": "P..2P"},
                                       max_peak_activations="1")

        def test_fixture(schedule_ok):
            assert schedule_ok("gpipe", P=2, M=2).ok
    """)
    )
    # autoload off (PYTEST_DISABLE_PLUGIN_AUTOLOAD): -p alone loads the plugin; the loads with
    # the entry point active are in tests/test_pytest_plugin_loading.py
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "ppir.testing.pytest_plugin",
            "-p",
            "no:cacheprovider",
            "--ppir-examples",
            "3",
            "-o",
            "addopts=",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = proc.stdout
    assert proc.returncode == 1 and "1 failed, 2 passed" in out, out + proc.stderr
    assert "ppir 0.1.0: 3 examples per schedule property test" in out
    # a failure reads as the shrunk shape and the diagnostic, named after the schedule; no
    # frame of ppir's own checks
    assert "\n1f1b(P=2, M=2) FAILS\n" in out and "exceed the bound 1 A ('1')" in out
    assert "test_too_tight - ppir.testing.PropertyFailure: " in out  # (cut to the width)
    # not ppir's frame of the property test either (it showed 'def test(params):' and
    # '> __tracebackhide__ = True' at ppir/testing/strategies.py, where it was)
    assert "checks.py" not in out and "def assert_schedule_ok" not in out
    assert "testing/property.py" not in out and "__tracebackhide__" not in out


def test_check_schedule_reads_a_json_program(tmp_path, cli):
    path = tmp_path / "p.json"
    code, out, _ = cli("dump", "zb_h1", "-D", "P=2", "-D", "M=4", "--format", "json")
    assert code == 0
    path.write_text(out)
    res = check_schedule(path, max_peak_activations=2)  # a path object, read as written
    assert res.ok and res.schedule.name == "zb_h1" and res.peak_activations == 2


def test_a_usage_mistake_is_a_ppir_error_not_a_failing_schedule():
    with pytest.raises(PpirError, match="the value of 'P' must be an integer, got str '4'"):
        assert_schedule_ok("1f1b", P="4", M=4)
    with pytest.raises(PpirError) as e:
        assert_schedule_ok("1f1b", P=2, M=4, Q=1)
    assert "unknown parameter 'Q' (Q=1)" in str(e.value)  # no CLI flag in a Python test


def test_property_test_refuses_a_misspelt_check_when_defined():
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'max_peak'.*the checks"):
        property_test("1f1b", over={"P": "2..3"}, max_peak="P")
    # a parameter of the schedule, held fixed, is a keyword too
    test = property_test("interleaved_1f1b", over={"P": "2..3"}, v=2, max_peak_activations="P")
    assert callable(test)
    # a bound naming no parameter, too (it failed as a counterexample when the test ran)
    with pytest.raises(PpirError) as e:
        property_test("1f1b", over={"P": "2..3"}, max_peak_activations="P+k")
    assert e.value.message == (
        "max_peak_activations 'P+k' refers to 'k', which is not a parameter of 1f1b"
    )


@pytest.mark.parametrize("spec", [{"P": 0}, {"M": range(-2, 1)}, {"v": []}])
def test_valid_schedules_refuses_a_spec_with_no_drawable_value(spec):
    from ppir.testing import valid_schedules

    name, value = next(iter(spec.items()))
    with pytest.raises(ValueError, match=f"valid_schedules: {name} needs a value of at least 1"):
        valid_schedules(**spec)
    assert valid_schedules(P=2, M=range(1, 3)) is not None


def test_each_property_test_has_its_own_example_database_key(tmp_path):
    # hypothesis keys saved examples on the test function's source and signature, which every
    # property_test shares: one test's saved failure replayed in another, unshrunk
    from hypothesis.internal.reflection import function_digest

    from ppir.testing import property_test

    a = property_test("1f1b", over={"P": "2..4", "M": "P..2P"})
    b = property_test("gpipe", over={"P": "2..4", "M": "P..2P"})
    c = property_test("1f1b", over={"P": "2..4", "M": "P..3P"})
    keys = {function_digest(t.hypothesis.inner_test) for t in (a, b, c)}
    assert len(keys) == 3


def test_a_misspelt_check_is_named_not_taken_for_a_parameter():
    from ppir.testing import assert_schedule_ok

    with pytest.raises(TypeError, match="'max_peak' .did you mean 'max_peak_activations'"):
        assert_schedule_ok("1f1b", max_peak="P", P=4, M=8)


@pytest.mark.parametrize("examples", [0, -1, 2.5, True])
def test_property_test_refuses_a_count_of_examples_below_one(examples):
    # examples=0 used to fall back silently to the profile's count (100): CLI and plugin refuse 0
    with pytest.raises(
        ValueError, match=f"property_test: examples must be at least 1, got {examples}"
    ):
        property_test("1f1b", over={"P": "2..3"}, examples=examples)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"kinds": ("swp",)}, "kinds are 'swap' and/or 'move', got .'swp',."),  # was: a move
        ({"kinds": "swap"}, "kinds are 'swap' and/or 'move', got 'swap'"),  # was: its letters
        ({"kinds": ()}, "kinds are 'swap' and/or 'move'"),
        ({"max_mutations": 0}, "max_mutations must be at least 1, got 0"),
    ],
)
def test_mutations_refuse_unknown_kinds_and_counts_when_called(kwargs, error):
    import ppir
    from ppir.testing import mutations

    with pytest.raises(ValueError, match=error):
        mutations(ppir.load("1f1b", P=2, M=2), **kwargs)
    with pytest.raises(TypeError, match="mutations takes a Schedule or a strategy of them"):
        mutations("1f1b")


@pytest.mark.parametrize(
    "value, said",
    [
        (5, "got int 5"),
        (None, "got NoneType None"),
        ("compiled", "got what ppir.compile returns: pass its .program (lowered) or .source"),
    ],
)
def test_a_schedule_of_another_type_is_named(value, said):
    """Was os.fspath's 'expected str, bytes or os.PathLike object, not Compiled'."""
    import ppir

    if value == "compiled":
        value = ppir.compile(ppir.load("1f1b", P=2, M=2))
    with pytest.raises(
        TypeError, match=re.escape(f"a schedule is a Schedule, a path or a name, {said}")
    ):
        assert_schedule_ok(value)


def test_mutations_of_another_type_quote_it_short():
    """A Compiled was quoted whole: its programs, graph and timeline, tens of kilobytes."""
    import ppir
    from ppir.testing import mutations

    with pytest.raises(TypeError) as e:
        mutations(ppir.compile(ppir.load("1f1b", P=3, M=3)))
    assert len(str(e.value)) < 200


@pytest.mark.parametrize("over", ["P=2..8", [("P", "2..8")]])
def test_property_test_refuses_an_over_that_is_no_dict(over):
    with pytest.raises(TypeError, match="property_test: over takes a dict, such as"):
        property_test("1f1b", over=over)
