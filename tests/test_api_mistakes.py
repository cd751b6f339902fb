"""Mistakes made through the Python API (a new-user trial's findings): each gets an error that
names the option or value, as the command line's own checks do, not a traceback from inside."""

from __future__ import annotations

import json
import re
import textwrap
import warnings

import pytest

import ppir
from ppir.compile_options import IgnoredOptionWarning
from ppir.ir.printer import MalformedProgram

REQUIRE = textwrap.dedent(
    """\
    schedule req(P = 4, M = 8)
    require M >= P : "need M >= P"
    ranks P
    microbatches M
    stages P
    placement looped
    program r {
      for m in 0 .. M { F(m) }
      for m in 0 .. M { B(m) }  # GPipe: every forward, then every backward
    }
    """
)


def test_an_uncaught_load_error_shows_its_location(tmp_path):
    path = tmp_path / "typo.pps"
    path.write_text(REQUIRE.replace("B(m)", "B(mb)"))
    with pytest.raises(ppir.PpirError) as e:
        ppir.load(path, P=2, M=4)
    text = str(e.value)  # what a traceback's last line shows
    assert text.startswith(f"{path}:9:23: error: undefined name 'mb'")
    assert "for m in 0 .. M { B(mb) }" in text and "hint: did you mean 'm'?" in text
    assert e.value.message == "undefined name 'mb'"


def test_load_text_takes_its_parameters_as_keywords():
    by_keywords = ppir.load_text(REQUIRE, P=2, M=4)
    assert by_keywords == ppir.load_text(REQUIRE, {"P": 2, "M": 4})
    assert (by_keywords.ranks, by_keywords.microbatches) == (2, 4)
    with pytest.raises(ppir.PpirError, match="unknown parameter 'Q'") as e:
        ppir.load_text(REQUIRE, Q=2)
    assert "-D" not in str(e.value)  # no command-line wording in the library


def test_a_misspelt_keyword_of_load_text_or_load_gets_a_did_you_mean(tmp_path):
    """load_text(src, pth=...) said only "unknown parameter 'pth'": the misspelt keyword was
    taken for a schedule parameter, with nothing pointing at load_text's own 'path'."""
    with pytest.raises(ppir.PpirError, match="unknown parameter 'pth'") as e:
        ppir.load_text(REQUIRE, pth="x.pps")
    hints = e.value.diagnostics[0].hints
    assert hints[0] == (
        "did you mean 'path'? (load_text's own keyword; pth= was taken as a schedule parameter)"
    )
    assert hints[-1] == "its parameters: P, M"  # the schedule's own hint stays
    with pytest.raises(ppir.PpirError) as e:
        ppir.load_text(REQUIRE, max_op=10)
    assert e.value.diagnostics[0].hints[0].startswith("did you mean 'max_ops'?")
    with pytest.raises(ppir.PpirError) as e:  # nothing close: no keyword hint
        ppir.load_text(REQUIRE, Q=2)
    assert e.value.diagnostics[0].hints == ("its parameters: P, M",)
    text = REQUIRE.replace("(P = 4, M = 8)", "(P = 4, M = 8, pth = 1)")  # a real parameter
    assert dict(ppir.load_text(text, pth=2).params)["pth"] == 2
    csv = tmp_path / "two.csv"
    csv.write_text("0F0,0B0\n")
    for spec in ("1f1b", "torch:1F1B", csv):  # ppir.load, whatever reads the schedule
        for value in ((0, 1, 2, 3), "x", 3):
            with pytest.raises(ppir.PpirError) as e:
                ppir.load(spec, placment=value)
            # torch:1F1B led with "the value of 'placment' must be an integer, got tuple ..."
            assert e.value.kind == "unknown-parameter", (spec, value)
            assert e.value.message.startswith("unknown parameter 'placment'"), (spec, value)
            assert "integer" not in str(e.value), (spec, value)
            assert e.value.diagnostics[0].hints[0] == (
                "did you mean 'placement'? (load's own keyword; placment= was taken as a schedule "
                "parameter)"
            ), spec


def test_a_keyword_did_you_mean_is_about_the_name_the_error_names():
    """load('1f1b', Q=1, placment=(0, 1)) said "unknown parameter 'Q'" with the hint "did you
    mean 'placement'? (load's own keyword; placment= ...)": a hint about another name."""
    with pytest.raises(ppir.PpirError) as e:
        ppir.load("1f1b", Q=1, placment=(0, 1))
    (d,) = e.value.diagnostics
    assert (d.message, d.hints) == (
        "unknown parameter 'Q' (Q=1) for schedule '1f1b'",
        ("its parameters: P, M",),
    )
    with pytest.raises(ppir.PpirError) as e:  # a dict's name comes first: no keyword's hint
        ppir.load_text(REQUIRE, {"Q": 1}, pth="x.pps")
    assert e.value.diagnostics[0].hints == ("its parameters: P, M",)
    with pytest.raises(ppir.PpirError) as e:  # the misspelt keyword named first: its hint
        ppir.load("1f1b", placment=(0, 1), Q=1)
    assert e.value.message.startswith("unknown parameter 'placment'")
    assert e.value.diagnostics[0].hints[0].startswith("did you mean 'placement'?")


def test_an_unknown_parameters_huge_value_is_shortened():
    """load('1f1b', Q=10**60) quoted all 61 digits; 10**5000 raised Python's ValueError
    'Exceeds the limit (4300 digits) for integer string conversion' from the message."""
    for value, shown in ((10**60, "<a 61-digit number>"), (-(10**5000), "-<a 5,001-digit number>")):
        with pytest.raises(ppir.PpirError) as e:
            ppir.load("1f1b", Q=value)
        assert e.value.message == f"unknown parameter 'Q' (Q={shown}) for schedule '1f1b'"


def test_an_unknown_parameters_text_value_is_quoted():
    """load('1f1b', foo='') said "unknown parameter 'foo' (foo=) ...": an empty value, or one
    with blanks, did not show; a text value is quoted as every message quotes one."""
    for value, shown in (("bar", "'bar'"), ("", "''"), ("a b", "'a b'"), (None, "None")):
        with pytest.raises(ppir.PpirError) as e:
            ppir.load("1f1b", foo=value)
        assert e.value.message == f"unknown parameter 'foo' (foo={shown}) for schedule '1f1b'"


def test_an_unknown_model_is_hinted_in_the_librarys_words_and_the_commands_in_its_own(
    cli, tmp_path
):
    """analyze(s, 'my_model.py') hinted 'ppir profile --module my_model.py -o costs.toml, then
    --config costs.toml': a flag the library has no place for.  The library names where its
    presets are and how a cost file reaches it (ppir.make_config); the commands keep theirs."""
    s = ppir.load("1f1b", P=4, M=8)
    for call in (
        lambda: ppir.analyze(s, "my_model.py"),
        lambda: ppir.make_config({"model": {"preset": "my_model.py"}}),
    ):
        with pytest.raises(ppir.PpirError) as e:
            call()
        (d,) = e.value.diagnostics
        assert d.message == "unknown model preset 'my_model.py'"
        assert d.hints[0].startswith("presets (ppir.analysis.models.PRESETS): gpt3-175b, ")
        assert d.hints[1] == (
            "to use your own model's costs, measure them: 'ppir profile --module my_model.py -o "
            "costs.toml' writes a cost file; compile with costs=ppir.make_config(tomllib.load("
            "open('costs.toml', 'rb')))"
        )
        assert "--config" not in str(e.value)
    with pytest.raises(ppir.PpirError) as e:  # a name close to a preset: the same list
        ppir.analyze(s, "llama3-9b")
    assert e.value.diagnostics[0].hints[:2] == (
        "did you mean 'llama3-8b'?",
        "presets (ppir.analysis.models.PRESETS): gpt3-175b, llama3-8b, llama3-70b, "
        "llama3-405b, gpt2-xl",
    )
    code, _, err = cli("analyze", "1f1b", "--model", "my_model.py")
    assert code == 2 and err.splitlines()[1:] == [
        "hint: presets: gpt3-175b, llama3-8b, llama3-70b, llama3-405b, gpt2-xl",
        "hint: to use your own model's costs, measure them: ppir profile --module my_model.py "
        "-o costs.toml, then --config costs.toml",
    ]
    toml = tmp_path / "c.toml"  # a --config file's [model] preset: the command's words too
    toml.write_text('[model]\npreset = "my_model.py"\n')
    code, _, err2 = cli("compile", "1f1b", "--config", str(toml))
    assert code == 2 and err2.splitlines()[1:] == err.splitlines()[1:]


def test_load_names_a_parameter_a_schedule_does_not_take_in_one_wording(tmp_path):
    """ppir.load named it three ways by kind: "unknown parameter 'Q' (Q=4) for schedule
    '1f1b'", "unknown parameter 'Q' for torch:1F1B" (no value, 'torch:1F1B takes P, M') and
    "unknown parameter 'P': a CSV schedule takes no parameters" (no value, no schedule)."""
    csv = tmp_path / "two.csv"
    csv.write_text("0F0,0B0\n")
    js = tmp_path / "p.json"
    js.write_text(json.dumps(ppir.to_json(ppir.load("1f1b", P=2, M=2))))
    for spec, name, where, takes in (
        ("1f1b", "Q", "schedule '1f1b'", "its parameters: P, M"),
        ("torch:1F1B", "Q", "schedule 'torch:1F1B'", "its parameters: P, M"),
        ("torch:GPipe", "v", "schedule 'torch:GPipe'", "its parameters: P, M"),
        (csv, "P", str(csv), "a CSV schedule takes no parameters: it is one fixed program"),
        (js, "M", str(js), "a JSON program takes no parameters: it is one fixed program"),
    ):
        with pytest.raises(ppir.PpirError) as e:
            ppir.load(spec, **{name: 4})
        (d,) = e.value.diagnostics
        assert (d.kind, d.message) == (
            "unknown-parameter",
            f"unknown parameter '{name}' ({name}=4) for {where}",
        )
        assert d.hints == (takes,)
    with pytest.raises(ppir.PpirError) as e:  # the name first, as a .pps schedule's
        ppir.load("torch:1F1B", Q="x")  # was: "the value of 'Q' must be an integer"
    assert e.value.message == "unknown parameter 'Q' (Q='x') for schedule 'torch:1F1B'"


def test_a_hardware_setting_without_a_model_is_hinted_in_the_librarys_words(cli, tmp_path):
    """make_config({'hardware': {'preset': 'H100'}}) hinted 'add --model PRESET (or a [model]
    section)': a flag the library has no place for.  The library's hint is its dict; a command's
    keeps its flag (models.model_hint, the one wording of both)."""
    for hardware in ({"preset": "H100"}, {"peak_tflops": 500}):
        with pytest.raises(ppir.PpirError) as e:
            ppir.make_config({"hardware": hardware})
        (d,) = e.value.diagnostics
        assert d.hints == (
            "add a 'model' table, e.g. ppir.make_config({'model': {'preset': 'llama3-8b'}, ...})",
        )
    ppir.make_config(
        {"model": {"preset": "llama3-8b"}, "hardware": {"preset": "H100"}}
    )  # as hinted
    toml = tmp_path / "c.toml"
    toml.write_text('[hardware]\npreset = "H100"\n')
    for flags in (["--config", str(toml)], ["--hardware", "H100"]):
        code, _, err = cli("compile", "1f1b", *flags)
        assert code == 2 and err.splitlines()[1] == (
            "hint: add --model PRESET (or a [model] table in --config), e.g. --model llama3-8b"
        )


@pytest.mark.parametrize(
    "spec, said",
    [
        ("llama3-8b,tp=x", "model 'llama3-8b,tp=x': tp must be an integer, got 'x'"),
        ("", "model needs a preset or key=value pairs, got an empty text"),
        ("llama3-8b,,tp=8", "model 'llama3-8b,,tp=8': an empty entry between commas"),
        ("llama3-8b,tp", "model 'llama3-8b,tp': expected key=value, got 'tp'"),
        ("llama3-8b,tp=2,tp=4", "model 'llama3-8b,tp=2,tp=4': 'tp' is given twice"),
    ],
)
def test_a_bad_model_spec_is_named_as_the_argument_not_as_the_command_flag(cli, spec, said):
    """analyze(s, 'llama3-8b,tp=x') said '--model llama3-8b,tp=x: ...', a flag the library
    call never had; the command keeps its '--model' wording."""
    with pytest.raises(ppir.PpirError) as e:
        ppir.analyze(ppir.load("1f1b", P=4, M=8), spec)
    assert e.value.message.startswith(said) and "--model" not in str(e.value)
    code, _, err = cli("analyze", "1f1b", "--model", spec)
    assert code == 2 and "--" + said.replace(f"model '{spec}'", f"model {spec}") in err


def test_a_parameter_in_the_wrong_case_gets_a_did_you_mean(cli):
    """'V' for 'v' scored 0 by similarity, so only the list of parameters was shown."""
    with pytest.raises(ppir.PpirError) as e:
        ppir.load("interleaved_1f1b", V=2)
    assert "hint: did you mean 'v'?" in str(e.value)
    code, _, err = cli("fuzz", "interleaved_1f1b", "--over", "V=1..2")
    assert code == 2 and "hint: did you mean 'v'?" in err


def test_load_takes_its_parameters_as_a_dict_too(tmp_path):
    """As load_text does; the dict was taken for a placement ('placement applies to CSV and
    torch:NAME schedules only')."""
    path = tmp_path / "req.pps"
    path.write_text(REQUIRE)
    assert ppir.load(path, {"P": 2, "M": 4}) == ppir.load(path, P=2, M=4)
    assert ppir.load(path, {"P": 2, "M": 4}, M=4) == ppir.load(path, P=2, M=4)  # agreeing
    with pytest.raises(ppir.PpirError, match="unknown parameter 'Q'"):
        ppir.load(path, {"Q": 2})
    with pytest.raises(ppir.PpirError) as e:
        ppir.load(path, (0, 1, 2, 3))  # a placement given where the parameters go
    assert e.value.kind == "bad-usage"
    assert e.value.message == (
        "params takes a dict of parameter values, such as {'P': 4}, got tuple (0, 1, 2, 3)"
    )
    assert "hint: a placement is given by keyword: placement=(0, 1, ...)" in str(e.value)


@pytest.mark.parametrize("load", [ppir.load, ppir.load_text])
def test_a_parameter_given_both_ways_with_different_values_is_refused(load):
    """ppir.load("1f1b", {"P": 4}, P=2, M=4) ran with P=2, the dict's P=4 silently dropped."""
    spec = "1f1b" if load is ppir.load else REQUIRE
    with pytest.raises(ppir.PpirError) as e:
        load(spec, {"P": 4, "M": 4}, P=2)
    assert e.value.kind == "bad-usage" and e.value.exit_code == 2
    assert e.value.message == "parameter 'P' given twice: 4 in params and 2 by keyword"
    same = load(spec, {"P": 2, "M": 4}, P=2)  # the same value twice is fine
    assert (same.ranks, same.microbatches) == (2, 4)


def test_a_csv_placement_from_the_api_names_the_argument_not_the_flag(tmp_path):
    from ppir.frontend.csvio import write_csv

    path = tmp_path / "g.csv"
    path.write_text(write_csv(ppir.load("gpipe", P=2, M=2)))
    assert ppir.load(path, placement=[0, 1]).placement == (0, 1)
    for placement, message in [
        ((0,), "placement lists 1 stage but the schedule uses 2 stages (0..1)"),
        ((0, 1, 0), "placement lists 3 stages but the schedule uses 2 stages (0..1)"),
        ((0, 5), "placement puts stage 1 on rank 5, but the schedule has 2 ranks"),
        ((1, 0), "0F0 runs on rank 0 but placement puts stage 0 on rank 1"),
        ("x", "placement takes a tuple of ranks, one per stage, got 'x'"),
        ((0, True), "placement takes a tuple of ranks, one per stage, got (0, True)"),
    ]:
        with pytest.raises(ppir.PpirError) as e:
            ppir.load(path, placement=placement)
        assert e.value.message.startswith(message), e.value.message
        assert "--placement" not in str(e.value)


def test_a_placement_for_a_schedule_with_its_own_names_the_argument():
    with pytest.raises(ppir.PpirError) as e:
        ppir.load("1f1b", placement=(0, 1, 2, 3))
    assert e.value.message.startswith("placement applies to CSV and torch:NAME schedules only")


@pytest.mark.parametrize(
    "option,error,needle",
    [
        ({"dp": 0}, ValueError, "dp must be at least 1"),
        ({"dp": -1}, ValueError, "dp must be at least 1"),
        ({"dp": 2.5}, TypeError, "dp takes an int, the data-parallel replicas, got 2.5"),
        ({"dp": "2"}, TypeError, "dp takes an int, the data-parallel replicas, got '2'"),
        ({"dp": True}, TypeError, "dp takes an int"),
        ({"verify": "x"}, ValueError, "verify takes True, False or 'final', got 'x'"),
        ({"verify": 1}, ValueError, "verify takes True, False or 'final', got 1"),
        ({"progress": "eager"}, ValueError, "unknown progress model .eager."),
        ({"overlap": "no"}, TypeError, "overlap takes True or False, got 'no'"),
        ({"strict": None}, TypeError, "strict takes True or False, got None"),
    ],
)
def test_compile_refuses_option_values_the_cli_would(option, error, needle):
    with pytest.raises(error, match=needle):
        ppir.compile(ppir.load("1f1b", P=2, M=4), **option)


def test_unverified_ok_says_whether_the_run_reaches_its_end():
    good = ppir.compile(ppir.load("1f1b", P=3, M=4), verify=False)
    assert good.ok and good.report is None
    bad = ppir.compile(ppir.load("1f1b", P=3, M=4), lowering="naive", verify=False)
    assert not bad.ok and bad.failed is None and not bad.timeline.complete


def test_from_json_and_make_config_name_what_they_take():
    with pytest.raises(MalformedProgram, match=r"is a dict, got str \(json.loads\(text\)"):
        ppir.from_json('{"format": "ppir.program/1"}')
    with pytest.raises(TypeError, match="make_config takes a dict of the cost file's sections"):
        ppir.make_config("comm.latency=0.25")


def test_from_json_of_a_malformed_object_is_a_ppir_error():
    """api.md promises a PpirError for bad input; from_json raised a bare ValueError."""
    with pytest.raises(ppir.PpirError) as e:
        ppir.from_json({"format": "ppir.program/1"})
    assert isinstance(e.value, MalformedProgram) and isinstance(e.value, ValueError)
    assert e.value.kind == "bad-input" and e.value.exit_code == 2 and e.value.where == ()
    assert e.value.message == "malformed ppir.program/1 program: missing key 'schedule'"
    assert str(e.value) == "ppir: error: malformed ppir.program/1 program: missing key 'schedule'"
    obj = ppir.to_json(ppir.load("1f1b", P=2, M=2))
    with pytest.raises(ppir.PpirError, match=r"programs\[1\]\[0\] must be an action string"):
        ppir.from_json({**obj, "programs": [obj["programs"][0], [5]]})


def test_no_choice_satisfying_the_require_lines_is_said_before_drawing(tmp_path):
    from ppir.testing import property_test, shapes

    path = tmp_path / "req.pps"
    path.write_text(REQUIRE)
    with pytest.raises(ppir.PpirError) as e:
        shapes(str(path), P="5..8", M="1..4")
    assert e.value.kind == "no-valid-parameters"
    assert e.value.message == (
        f"no choice in P in 5..8, M in 1..4 satisfies the require lines of {path}"
    )
    with pytest.raises(ppir.PpirError, match="satisfies the require lines"):
        property_test(str(path), over={"P": "5..8", "M": "1..4"})
    assert shapes(str(path), P="5..8", M="1..5") is not None  # one choice: P=5, M=5
    with pytest.raises(ppir.PpirError, match="satisfies the require lines"):  # 4,096 choices
        shapes(str(path), P="65..128", M="1..64")
    assert shapes(str(path), P="65..128", M="1..65") is not None  # more: left to the draws


def test_an_unverified_program_that_cannot_finish_says_so_when_analyzed(cli, tmp_path):
    """With ok meaning 'runs to its end' for unverified programs, analyze and viz raised an
    empty PpirError (no message, no kind): they say which ranks are stuck instead."""
    bad = ppir.compile(ppir.load("1f1b", P=3, M=4), lowering="naive", verify=False)
    with pytest.raises(ppir.PpirError) as e:
        ppir.analyze(bad)
    assert e.value.kind == "deadlock" and "ranks 0, 1 and 2 wait forever" in str(e.value)
    code, _, err = cli("viz", "1f1b", "-D", "P=3", "-D", "M=4", "--lowering", "naive",
                       "--no-verify", "-o", str(tmp_path / "x.html"))  # fmt: skip
    assert code == 1 and "cannot finish under rendezvous semantics" in err
    assert not (tmp_path / "x.html").exists()
    assert str(ppir.PpirError([])) == "error" and ppir.PpirError([]).kind == "error"


MIXED = textwrap.dedent(
    """\
    schedule mixed(P = 2, M = 2)
    ranks 2
    stages 2
    microbatches 2
    rank 0: 0F0 0SEND_F0 0F1 [0SEND_F1 0RECV_B0] 0B0 0RECV_B1 0B1
    rank 1: 1RECV_F0 1F0 1B0 [1SEND_B0 1RECV_F1] 1F1 1B1 1SEND_B1
    """
)


def test_verify_of_a_compiled_program_honours_strict_and_progress():
    s = ppir.load_text(MIXED, path="mixed.pps")  # a mixed-batched lint: a warning
    c = ppir.compile(s)
    assert c.ok and ppir.verify(c).ok
    assert not ppir.verify(s, strict=True).ok
    strict = ppir.verify(c, strict=True)  # was the compile's own report: ok
    assert not strict.ok and {d.kind for d in strict.errors} == {"mixed-batched"}
    relaxed = ppir.verify(c, progress="relaxed")
    assert relaxed is not c.report and relaxed.ok
    with pytest.raises(TypeError, match="strict takes True or False, got 'yes'"):
        ppir.verify(c, strict="yes")


def test_estimate_of_a_compiled_program_refuses_other_costs():
    s = ppir.load("1f1b", P=4, M=8)
    c = ppir.compile(s)
    cfg = ppir.make_config({"comm": {"latency": "0.5"}})
    assert ppir.estimate(c, c.config).step_time == ppir.estimate(c).step_time == 33
    with pytest.raises(ValueError, match="timed under the costs and progress model it was"):
        ppir.estimate(c, cfg)  # was 33, silently: the compile's costs, not cfg's (41)
    with pytest.raises(ValueError, match="timed under the costs and progress model it was"):
        ppir.estimate(c, progress="relaxed")
    with pytest.raises(TypeError, match="costs takes a CostConfig"):
        ppir.estimate(c, 5)
    assert ppir.estimate(s, cfg).step_time == 41


def test_analyze_names_a_model_of_the_wrong_type():
    c = ppir.compile(ppir.load("1f1b", P=2, M=2))
    with pytest.raises(TypeError, match=r"model takes a ModelShape or a spec .*got int 5"):
        ppir.analyze(c, 5)  # was AttributeError: 'int' object has no attribute 'layers'


@pytest.mark.parametrize(
    "option,said,instead",
    [
        ({"lowering": "naive"}, "lowering='naive'", "passes='lower-comms{strategy=naive}'"),
        ({"overlap": False}, "overlap=False", "passes='lower-comms'"),
        (
            {"lowering": "eager", "overlap": False},
            "lowering='eager' and overlap=False",
            "passes='lower-comms{strategy=eager}'",
        ),
    ],
)
def test_passes_with_lowering_or_overlap_is_refused_not_half_ignored(option, said, instead):
    """was: passes won and lowering/overlap were dropped without a word (pipeline 'lower-comms'
    for lowering='naive')."""
    s = ppir.load("1f1b", P=2, M=4)
    with pytest.raises(ValueError) as e:
        ppir.compile(s, passes="lower-comms,overlap-comms", **option)
    message = str(e.value)
    assert message.startswith(f"{said} with passes='lower-comms,overlap-comms': passes spells")
    assert f"is {instead}" in message and "lower-comms{strategy=...}" in message
    # what the hint says runs what the options ask for
    text = instead.split("=", 1)[1].strip("'")
    assert ppir.compile(s, passes=text).pipeline == ppir.compile(s, **option).pipeline == text
    # the defaults, given, are no conflict
    assert ppir.compile(s, passes="lower-comms", lowering="auto", overlap=True).ok


def test_compiling_a_lowered_program_warns_of_the_options_it_ignores():
    """was: passes=... on a literal program with communication did nothing (pipeline '')
    without a word, where the command line warns."""
    lowered = ppir.compile(ppir.load("1f1b", P=2, M=4)).program
    with pytest.warns(IgnoredOptionWarning) as caught:
        c = ppir.compile(lowered, passes="lower-comms{strategy=eager},overlap-comms")
    assert c.ok and c.pipeline == "" and c.program is lowered
    [w] = caught
    assert str(w.message).startswith(
        "passes='lower-comms{strategy=eager},overlap-comms' ignored: 1f1b already has its "
        "communication (SEND/RECV), so it runs as written"
    )
    assert w.filename == __file__  # points at the caller's line, not inside ppir
    with pytest.warns(IgnoredOptionWarning, match="^lowering='eager' and"):
        ppir.compile(lowered, lowering="eager", overlap=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ppir.compile(lowered).ok  # nothing asked, nothing said
        assert ppir.compile(lowered, passes="forward-only,lower-comms").pipeline  # lowered anew


def test_verify_of_a_strict_compile_without_strict_reads_lints_as_warnings():
    s = ppir.load_text(MIXED, path="mixed.pps")
    c = ppir.compile(s, strict=True)
    assert not c.report.ok  # its lint is an error under strict
    r = ppir.verify(c)  # was the strict compile's report: not ok
    assert r.ok and {d.kind for d in r.warnings} == {"mixed-batched"}
    assert not ppir.verify(c, strict=True).ok


def test_estimate_of_a_compiled_program_takes_the_costs_it_was_compiled_with_and_dp():
    s = ppir.load("1f1b", P=4, M=8)
    cfg = ppir.make_config({"model": {"preset": "llama3-8b"}})
    c = ppir.compile(s, costs=cfg, dp=2)  # the config's model gets dp=2
    assert ppir.estimate(c, cfg) is c.estimate  # was a ValueError: 'compile it again with them'
    other = ppir.make_config({"model": {"preset": "llama3-8b", "dp": 4}})
    with pytest.raises(ValueError, match="timed under the costs and progress model it was"):
        ppir.estimate(c, other)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ppir.load_text(REQUIRE.encode()), "load_text takes the .pps source as a str"),
        (lambda: ppir.load_text(None), "load_text takes the .pps source as a str, got NoneType"),
        (lambda: ppir.load_text(REQUIRE, [("P", 2)]), "params takes a dict of parameter values"),
        (lambda: ppir.load_text(REQUIRE, {1: 2}), "a parameter is named by a str, such as 'P'"),
        (lambda: ppir.load("1f1b", {1: 2}), "a parameter is named by a str, such as 'P', got 1"),
    ],
)
def test_load_text_and_parameters_of_the_wrong_type_are_ppir_errors(call, message):
    """Each was a TypeError from inside Lark, dict unpacking or difflib."""
    with pytest.raises(ppir.PpirError, match=re.escape(message)) as e:
        call()
    assert e.value.kind == "bad-usage"
