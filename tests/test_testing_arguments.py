"""Arguments of the wrong type or value given to ppir.testing (a second new-user trial's
findings): each is an error naming the argument and the value, never a check that passes
silently or a TypeError from inside the standard library."""

from __future__ import annotations

import pytest

import ppir
from ppir.testing import property_test


def test_property_test_of_an_expanded_schedule_says_what_takes_one():
    """Was os.fspath's 'expected str, bytes or os.PathLike object, not Schedule'."""
    s = ppir.load("1f1b", P=2, M=2)
    with pytest.raises(TypeError) as e:
        property_test(s, over={"P": "2..4"})
    said = str(e.value)
    assert said.startswith("property_test takes a .pps path or a built-in name, got Schedule ")
    assert said.endswith(
        "; an expanded Schedule has its parameters fixed: assert_schedule_ok(schedule)"
    )
    assert len(said) < 300
    with pytest.raises(
        TypeError, match="property_test takes a .pps path or a built-in name, got int 5"
    ):
        property_test(5, over={"P": "2..4"})


@pytest.mark.parametrize("option", ["max_peak_activations", "max_bubble", "max_step_time"])
def test_a_nan_bound_is_refused_not_held(option):
    """Every comparison with NaN is false: 'peak > nan' never failed, so the check held for
    every schedule, a bad one included."""
    from ppir.testing import check_schedule

    with pytest.raises(ValueError) as e:
        check_schedule("1f1b", P=2, M=2, **{option: float("nan")})
    assert str(e.value) == f"{option} is NaN: no value exceeds it, so the check cannot fail"
    with pytest.raises(ValueError, match=rf"^{option} is NaN \(returned by <function "):
        check_schedule("1f1b", P=2, M=2, **{option: lambda p: float("nan")})
    assert check_schedule("1f1b", P=2, M=2, **{option: float("inf")}).ok  # no bound at all


def test_check_schedule_checks_one_size_of_a_torch_schedule():
    """Was 'torch:GPipe(P=2, M=4) FAILS / expansion fails: torch's schedule classes cannot be
    checked over parameter ranges here', for one size, which 'ppir check torch:GPipe' checks."""
    pytest.importorskip("torch")
    from ppir.testing import assert_schedule_ok, check_schedule

    res = assert_schedule_ok("torch:GPipe", P=2, M=4, max_peak_activations="M")
    assert (res.name, res.params, res.peak_activations) == ("torch_GPipe", {"P": 2, "M": 4}, 4)
    bad = check_schedule("torch:GPipe", P=2, M=4, max_peak_activations="P")
    assert bad.status == "failed" and "exceed the bound 2 A ('P')" in bad.failures[0]


def test_a_size_torch_rejects_is_unsupported_not_failed():
    """A size torch's constructor refuses is one the schedule does not define, as a require
    line's: status 'unsupported', for a hand-written @given to assume() away (was 'failed:
    expansion fails', indistinguishable from a schedule that breaks)."""
    pytest.importorskip("torch")
    from ppir.testing import check_schedule

    res = check_schedule("torch:Interleaved1F1B", P=4, M=9, v=2)  # M % (M // P) != 0
    assert res.status == "unsupported" and not res.ok
    head, why = res.render().splitlines()[:2]
    assert head.endswith("(P=4, M=9, v=2) is not defined (torch's constructor rejects it)")
    assert why.startswith("ppir: error: torch rejects Interleaved1F1B(P=4, M=9, v=2)")
    assert check_schedule("torch:1F1B", P=4, M=8).status == "failed"  # torch's own bug (docs)


def test_a_failing_property_test_reports_the_shape_not_lines_of_ppir():
    """hypothesis' explain phase added 'These lines were always and only run by failing test
    cases: .../ppir/testing/checks.py:267 ...' under the counterexample: lines of ppir's own
    checks, which point a user away from the schedule."""
    from pathlib import Path

    bad = Path(__file__).parent.parent / "examples" / "bad_schedule.pps"
    test = property_test(bad, over={"P": "2..4", "M": "P..3P"}, max_peak_activations="P")
    with pytest.raises(AssertionError) as e:
        test()
    notes = "\n".join(getattr(e.value, "__notes__", []))
    assert str(e.value).startswith("bad_schedule(P=2, M=3) FAILS\npeak activations 3 A")
    assert "params={'P': 2, 'M': 3}" in notes
    assert "ppir" not in notes.replace("check_bad_schedule", ""), notes


def test_a_parameter_both_drawn_and_held_is_refused_when_defined():
    """property_test('1f1b', over={'P': '2..4'}, P=3) was defined, then every run failed with
    "assert_schedule_ok() got multiple values for keyword argument 'P'"."""
    with pytest.raises(TypeError) as e:
        property_test("1f1b", over={"P": "2..4", "M": "P..2P"}, P=3)
    assert str(e.value) == (
        "property_test: 'P' is drawn from over={'P': '2..4'} and held at P=3; give it in one "
        "of them"
    )


@pytest.mark.parametrize("value", ["yes", "no", 1, 0])
def test_valid_schedules_names_a_split_backward_that_is_no_bool(value):
    """split_backward='no' drew split backwards (a non-empty str is true); 0 and 1 were read
    as False and True without a word."""
    from ppir.testing import valid_schedules

    with pytest.raises(TypeError) as e:
        valid_schedules(P=2, M=2, split_backward=value)
    said = f"valid_schedules: split_backward is True, False or None, got {value!r}"
    assert str(e.value) == said


def test_the_readme_property_test_runs_from_any_directory(tmp_path, monkeypatch):
    """The README's block named "examples/my_schedule.pps", a path from the working directory:
    copied into a test file, it failed ('no such file') unless pytest ran from the repo root."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    text = (root / "README.md").read_text()
    section = text.split("### Property-testing your schedule", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```python\n(.*?)```", section, re.S)
    monkeypatch.chdir(tmp_path)
    namespace = {"__file__": str(root / "examples" / "test_my_schedule.py")}
    exec(compile(block, "README.md (Property-testing)", "exec"), namespace)  # noqa: S102
    namespace["test_my_schedule"]()  # 15 shapes, each verified with its peak within P


def test_testing_md_gives_assert_schedule_ok_the_keywords_check_schedule_takes():
    """docs/testing.md's signature left out max_ops, which check_schedule takes (and
    property_test lists among its checks)."""
    import ast
    import inspect
    import re
    from pathlib import Path

    from ppir.testing import check_schedule

    text = (Path(__file__).resolve().parent.parent / "docs" / "testing.md").read_text()
    [doc] = re.findall(r"`assert_schedule_ok\((schedule, \*,.*?)\)` expands", text, re.S)
    fn = ast.parse(f"def f({' '.join(doc.split())}): pass").body[0]
    documented = {
        a.arg: ast.literal_eval(d) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults)
    }
    real = inspect.signature(check_schedule).parameters
    assert documented == {n: p.default for n, p in real.items() if p.kind is p.KEYWORD_ONLY}


def test_a_property_failure_is_an_assertion_error_that_ppir_testing_names():
    from ppir.testing import PropertyFailure

    assert issubclass(PropertyFailure, AssertionError)
    assert not PropertyFailure("x").pytrace  # pytest prints the message alone


def test_a_mistake_in_over_is_raised_without_ppir_frames_under_the_definition():
    """pytest's collection error ran through ppir's own modules (loader.py, keywords.py) before
    the message; now it shows the test module's line and the message."""
    import traceback

    from ppir import PpirError

    with pytest.raises(PpirError, match="unknown parameter 'Q'") as e:
        property_test("gpipe", over={"Q": "1..2"})
    files = [f.filename for f in traceback.extract_tb(e.value.__traceback__)]
    assert not any(("frontend" in f or "checks.py" in f) for f in files), files
    assert sum("testing/property.py" in f for f in files) == 1, files  # property_test, hidden


def test_a_parameter_without_default_left_out_of_over_is_refused_when_defined(tmp_path):
    """property_test(f, over={'P': ...}) of a schedule whose M has no default was defined, and
    then failed with a falsifying example, hypothesis' traceback and "give it with M=..."."""
    from ppir import PpirError

    f = tmp_path / "nd.pps"
    f.write_text("schedule nd(P = 4, M)\nranks P\nmicrobatches M\nprogram r { F(0) B(0) }\n")
    with pytest.raises(PpirError) as e:
        property_test(f, over={"P": "2..4"})
    assert str(e.value).splitlines()[0] == (
        f"{f}:1:20: error: parameter 'M' has no default; give it with over={{'M': ...}} or M=..."
    )
    property_test(f, over={"P": "2..4"}, M=4)  # held fixed: defined
