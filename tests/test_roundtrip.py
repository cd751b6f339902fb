"""Printing and re-parsing the IR is the identity; so is the JSON program form."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, reject
from hypothesis import strategies as st

import ppir
from ppir.diagnostics import PpirError
from ppir.frontend.loader import load_schedule, load_text
from ppir.ir.printer import format_pps, from_json, to_json
from ppir.passes import LowerComms

BUILTINS = ["gpipe", "1f1b", "interleaved_1f1b", "interleaved_vshape", "looped_bfs"]


@st.composite
def lowered_schedules(draw):
    name = draw(st.sampled_from(BUILTINS))
    P = draw(st.integers(1, 5))
    v = draw(st.integers(1, 3))
    M = draw(st.integers(1, 3 * P))
    params = {"P": P, "M": M} | (
        {"v": v} if name in ("interleaved_1f1b", "interleaved_vshape", "looped_bfs") else {}
    )
    try:
        s = load_schedule(name, params)
    except PpirError:
        reject()  # a require failed for these parameters
    strategy = draw(st.sampled_from(["lockstep", "naive", None]))
    return s if strategy is None else LowerComms(strategy).apply(s)


@given(lowered_schedules())
def test_print_parse_roundtrip(s):
    assert load_text(format_pps(s), path="<roundtrip>") == s


@given(lowered_schedules())
def test_json_roundtrip(s):
    obj = to_json(s)
    assert from_json(json.loads(json.dumps(obj))) == s
    assert obj["format"] == "ppir.program/1"
    assert len(obj["programs"]) == s.ranks


def test_printed_ir_golden(golden):
    for name, params in [
        ("1f1b", {"P": 3, "M": 4}),
        ("interleaved_1f1b", {"P": 2, "M": 4, "v": 2}),
        ("interleaved_vshape", {"P": 2, "M": 2, "v": 2}),
    ]:
        s = LowerComms().apply(load_schedule(name, params))
        golden(f"ir/{name}.pps", format_pps(s))
    naive = LowerComms("naive").apply(load_schedule("1f1b", {"P": 3, "M": 4}))
    golden("ir/1f1b_naive.pps", format_pps(naive))


@pytest.mark.parametrize("name", ["zb_h1", "interleaved_1f1b", "dualpipev"])
def test_dump_json_reads_back_as_the_same_program(name, cli, tmp_path):
    f = tmp_path / "p.json"
    code, out, _ = cli("dump", name, "-D", "P=4", "-D", "M=8", "--format", "json")
    assert code == 0
    f.write_text(out)
    code, again, _ = cli("dump", str(f), "--format", "json")
    assert code == 0 and json.loads(again)["programs"] == json.loads(out)["programs"]
    a = cli("compile", name, "-D", "P=4", "-D", "M=8", "--format", "json")[1]
    b = cli("compile", str(f), "--format", "json")[1]
    assert json.loads(a)["step_time"] == json.loads(b)["step_time"]


@pytest.mark.parametrize(
    "text, said",
    [
        ('{"format":\n  "ppir.program/1",, }', "p.json:2:20: error: not valid JSON"),
        ("", "/p.json: the file is empty\n"),  # was 'not valid JSON: Expecting value'
        (" \n\n", "/p.json: the file is empty\n"),
        ('{"format": "x"}', "not a ppir.program/1 program (format: 'x')"),
        ("{}", "not a ppir.program/1 program (it has no 'format' key)"),  # was (format: None)
        ("[1]", "not a ppir.program/1 program (it holds a JSON array)"),  # was (format: 'list')
        ('{"format": "ppir.program/1"}', "malformed ppir.program/1 program: missing key"),
        ("[" * 100_000 + "]" * 100_000, "p.json: not readable JSON: it nests too deeply"),
    ],
)
def test_a_bad_json_program_is_one_clear_error(text, said, cli, tmp_path):
    f = tmp_path / "p.json"
    f.write_text(text)
    code, _, err = cli("check", str(f))
    assert code == 2 and said in err and "Traceback" not in err


def _set(key, value):
    return lambda obj: obj.__setitem__(key, value)


def _set_action(r, i, value):
    return lambda obj: obj["programs"][r].__setitem__(i, value)


@pytest.mark.parametrize(
    "edit, said, at",  # at: text on the line the error points at
    [
        (_set("ranks", 3), "programs holds 2 lists but ranks is 3", '"programs"'),
        (
            _set("stages", 5),
            "the placement gives a rank for 2 stages, but the schedule has 5 stages",
            '"placement"',
        ),
        (
            _set("placement", [0]),
            "the placement gives a rank for 1 stage, but the schedule has 2 stages",
            '"placement"',
        ),
        (
            _set("placement", [0, 2]),
            "placement puts stage 1 on rank 2, out of range",
            '"placement"',
        ),
        (_set_action(0, 2, "5F0"), "action 5F0 names stage 5, out of range 0..1", '"5F0"'),
        (
            lambda obj: obj["programs"].pop(),
            "programs holds 1 list but ranks is 2",
            '"programs"',
        ),
        (_set_action(0, 0, 5), "programs[0][0] must be an action string (e.g. 2F0), got 5", "5,"),
        (_set_action(1, 3, "0Q0"), "not an action: '0Q0'", '"0Q0"'),
        (_set("params", [1, 2]), "params must be an object of integers, got [1, 2]", '"params"'),
        (_set("params", {"P": "x"}), "params.P must be an integer, got 'x'", '"x"'),
        (_set("ranks", "2"), "ranks must be an integer, got '2'", '"ranks"'),
        (_set("microbatches", 2.0), "microbatches must be an integer, got 2.0", '"microbatches"'),
        (_set("microbatches", -1), "microbatches must be at least 0, got -1", '"microbatches"'),
        (
            _set("pipelines", 3),
            "pipelines must be at least 1 and divide the stages (2), got 3",
            '"pipelines"',
        ),  # fmt: skip
        (_set("programs", "0F0"), "programs must be a list with one list per rank", '"programs"'),
        (
            lambda obj: obj["waits"][1].__setitem__(0, [2, 9]),
            "waits[1][0][1] must be in 0..3",
            "9",
        ),  # fmt: skip
        (  # a group around compute actions (was a one-line error before the checks moved)
            lambda obj: obj["groups"][0].__setitem__(0, [1, 3]),
            "groups[0][0]: group holds a compute action 0F1",
            "[",
        ),
        (_set("overlaps", [[[0, 2]], []]), "overlaps another group or overlapped step", "["),
        (  # was "0F1 appears twice (rank 0, step 6)", unlocated
            lambda obj: obj["groups"][0].__setitem__(3, [5, 2]),
            "groups[0][3] runs backwards, from 5 to 2: it is [start, end] of positions in "
            "programs[0], end excluded",
            "[",
        ),
        (  # was "deferred[0][0] must be a group in 0..-1, got 0"
            lambda obj: obj.pop("groups"),
            "deferred[0][0] names a group, but rank 0 has none (the object has no 'groups')",
            "0,",
        ),
        (
            lambda obj: (obj["groups"].__setitem__(1, []), obj["deferred"].__setitem__(1, [])),
            "waits[1][0] names a group, but rank 1 has none (groups[1] is [])",
            "[",
        ),
        (_set("overlaps", [[[1, 2]], []]), "overlaps another group or overlapped step", "["),
    ],
)
def test_a_hand_edited_json_program_is_one_clear_error_at_the_value(edit, said, at, cli, tmp_path):
    f = tmp_path / "p.json"
    obj = json.loads(cli("dump", "1f1b", "-D", "P=2", "-D", "M=2", "--format", "json")[1])
    edit(obj)
    f.write_text(text := json.dumps(obj, indent=2))
    code, _, err = cli("check", str(f))
    # a stage out of range names an op the program does not have: invalid (1), as a
    # microbatch out of range; the others are unusable input (2)
    assert code == (1 if "names stage" in said else 2) and "Traceback" not in err, err
    first, *rest = err.splitlines()
    assert [line for line in err.splitlines() if "error:" in line] == [first], err
    where, message = first.split(": error: ")
    assert said in message and where.startswith(f"{f}:"), err
    line = int(where.split(":")[-2])
    assert at in text.splitlines()[line - 1], err


def test_a_verifier_error_in_a_json_program_points_at_the_op_in_its_text(cli, tmp_path):
    """Deadlocks and unmatched messages in a JSON program printed 'ppir: error: ...' with no
    place; they are located at the op's string in the file, as a .pps file's are at its line
    (tests/verify_corpus/json_*.json show it rendered)."""
    f = tmp_path / "p.json"
    argv = ("dump", "1f1b", "-D", "P=2", "-D", "M=2", "--format", "json", "--lowering", "naive")
    obj = json.loads(cli(*argv, "--no-verify")[1])
    f.write_text(text := json.dumps(obj))  # one line: the column tells the ops apart
    code, _, err = cli("check", str(f))
    col = text.index('"0SEND_F1"') + 1  # rank 0 blocks sending it: the cycle starts there
    assert code == 1 and err.startswith(f"{f}:1:{col}: error: deadlock: ranks 0 and 1"), err
    obj["programs"][1].remove("1SEND_B1")  # rank 0's last RECV_B has no send
    f.write_text(text := json.dumps(obj, indent=1))
    (d,) = [e for e in ppir.verify(ppir.load(f)).errors if e.kind == "unmatched-recv"]
    assert d.span.path == str(f), d.render()
    assert text.splitlines()[d.span.line - 1][d.span.col - 1 :] == '"0RECV_B1",'


def test_json_programs_declare_no_parameters_in_every_command(cli, tmp_path):
    """launch, viz --compare, tune --schedules and fuzz ask which parameters a schedule
    declares; a JSON program declares none (they used to parse it as .pps: "unexpected '{'")."""
    f = tmp_path / "p.json"
    f.write_text(cli("dump", "1f1b", "-D", "P=2", "-D", "M=2", "--format", "json")[1])
    html = tmp_path / "x.html"
    code, out, err = cli("viz", "1f1b", "-D", "P=2", "-D", "M=2", "--compare", str(f), "-o",
                         str(html))  # fmt: skip
    assert code == 0 and html.exists(), err
    code, out, err = cli("tune", "-P", "2", "--global-batch", "2", "--schedules", str(f))
    assert code == 0 and str(f) in out, err  # ranked: its own P=2 and M=2
    # a fixed program is a candidate only for its own P and M (it was labelled P=4 M=16)
    code, out, err = cli("tune", "-P", "4", "--global-batch", "16", "--schedules", str(f))
    assert code == 1 and "(no feasible choice)" in out, out
    assert f"{f}: the program has 2 ranks and 2 microbatches, not 4 and 16" in out, out
    code, _, err = cli("fuzz", str(f), "--over", "P=2..3")
    assert code == 2 and "Traceback" not in err
    assert f"unknown parameter 'P' (--over P='2..3') for {f}" in err
    assert "a JSON program takes no parameters: it is one fixed program" in err
    pytest.importorskip("torch")
    code, out, err = cli("launch", "-n", "3", str(f), "--module", "examples/gpt_model.py")
    assert code == 2 and "-n 3: the schedule has 2 ranks" in err and "unexpected" not in err
    assert f"hint: use -n 2 ({f} is a fixed program: it takes no -D)" in err
    code, out, err = cli(
        "launch", "-n", "4", "1f1b", "-D", "P=2", "--module", "examples/gpt_model.py"
    )
    assert code == 2 and "hint: use -n 2, or set the schedule's rank count with -D" in err


def test_declared_params_is_one_answer_for_every_kind_of_schedule(cli, tmp_path):
    from ppir.frontend.loader import declared_params

    f = tmp_path / "p.json"
    f.write_text(cli("dump", "1f1b", "-D", "P=2", "-D", "M=2", "--format", "json")[1])
    c = tmp_path / "p.csv"
    c.write_text("0F0,0B0\n1F0,1B0\n")
    assert declared_params(f) == declared_params(str(c)) == set()
    assert declared_params("torch:GPipe") == {"P", "M"}
    assert declared_params("torch:interleaved1f1b") == {"P", "M", "v"}
    with pytest.raises(PpirError, match="unknown torch schedule 'Nope'"):
        declared_params("torch:Nope")
    with pytest.raises(PpirError) as e:  # torch's class name: no close match by similarity
        declared_params("torch:Schedule1F1B")
    assert "hint: did you mean '1F1B'? (torch:NAME takes torch's class name without " in (
        e.value.render()
    )
    assert declared_params("1f1b") == {"P", "M"}
    with pytest.raises(PpirError, match="no such file"):
        declared_params(str(tmp_path / "missing.pps"))


def test_a_json_program_takes_neither_parameters_nor_a_placement(cli, tmp_path):
    f = tmp_path / "p.json"
    f.write_text(cli("dump", "1f1b", "-D", "P=2", "-D", "M=2", "--format", "json")[1])
    code, _, err = cli("check", str(f), "-D", "P=4")
    assert code == 2 and err.splitlines() == [
        f"ppir: error: unknown parameter 'P' (-D P=4) for {f}",
        "hint: a JSON program takes no parameters: it is one fixed program",
    ]
    code, _, err = cli("check", str(f), "--placement", "1,0")
    assert (
        code == 2
        and "--placement applies to CSV and torch:NAME schedules only; a JSON program holds" in err
    )


def test_to_pps_refuses_a_name_the_header_cannot_hold():
    """It wrote 'schedule my sched!()', which does not parse back (api.md says it does)."""
    import dataclasses

    import ppir

    s = load_schedule("1f1b", {"P": 2, "M": 2})
    for name in ("my-sched", "2x", "_a-1"):  # what the grammar takes round-trips
        named = dataclasses.replace(s, name=name)
        assert load_text(ppir.to_pps(named)) == named
    with pytest.raises(PpirError) as e:
        ppir.to_pps(dataclasses.replace(s, name="my sched!"))
    assert e.value.kind == "bad-name" and e.value.message == (
        "the schedule name 'my sched!' cannot be written in a .pps header, which takes letters, "
        "digits, '_' and '-' (not first)"
    )
    assert "hint: rename it, e.g. to 'my_sched_'" in str(e.value)
    with pytest.raises(PpirError, match="rename it, e.g. to 's_-x'"):
        format_pps(dataclasses.replace(s, name="-x"))
    with pytest.raises(PpirError, match="the parameter name 'my P' cannot be written") as e:
        ppir.to_pps(dataclasses.replace(s, params=(("my P", 2),)))
    assert "rename it, e.g. to 'my_P'" in str(e.value)


def test_the_printer_s_names_are_the_grammar_s():
    from ppir.frontend.parser import _parser
    from ppir.ir.printer import PARAM_NAME, SCHEDULE_NAME

    terminals = {t.name: t.pattern.value for t in _parser().terminals}
    assert SCHEDULE_NAME.pattern == terminals["SCHEDULE_NAME"]
    assert PARAM_NAME.pattern == terminals["NAME"]


def test_a_file_stem_the_header_cannot_hold_is_made_a_name_it_can(tmp_path, cli):
    from ppir.frontend.csvio import write_csv

    gpipe = load_schedule("gpipe", {"P": 2, "M": 2})
    (tmp_path / "my sched.csv").write_text(write_csv(gpipe))
    (tmp_path / "no header!.pps").write_text("rank 0: 0F0 0B0\n")
    for stem, name in (("my sched.csv", "my_sched"), ("no header!.pps", "no_header_")):
        s = load_schedule(str(tmp_path / stem))
        assert s.name == name and load_text(format_pps(s)) == s
        code, out, err = cli("dump", str(tmp_path / stem), "--compute-only")
        assert code == 0 and out.startswith(f"schedule {name}()"), err


def test_json_spans_never_compare_the_text_with_an_earlier_load():
    """Locating every action of a JSON program reads the text's line starts once per load.
    They were kept in an lru_cache keyed by the text, so each lookup of a second load, an equal
    but distinct string, compared the two texts: minutes for a 10 MB program loaded twice."""
    from ppir.frontend.json_source import json_item_spans

    compared = []

    class Text(str):
        __hash__ = str.__hash__

        def __eq__(self, other):
            compared.append(1)
            return str.__eq__(self, other)

    body = '{"programs": [["0F0", "0B0"], ["1F0", "1B0"]]}'
    first = json_item_spans("a.json", Text(body), ("programs", 1))
    again = json_item_spans("a.json", Text(body), ("programs", 1))
    assert (
        [(s.line, s.col) for s in again] == [(s.line, s.col) for s in first] == [(1, 32), (1, 39)]
    )
    assert compared == []


def test_file_extensions_are_read_in_either_case(cli, tmp_path):
    """S.CSV, P.JSON and (for import) O.TXT were parsed as .pps ("unexpected '0F0'", with a
    hint to use a .csv file), though -o already compared suffixes in lower case."""
    (tmp_path / "S.CSV").write_text("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n")
    (tmp_path / "O.TXT").write_text("0F0 0F1 0B0 0B1\n1F0 1B0 1F1 1B1\n")
    code, out, _ = cli("dump", "1f1b", "-D", "P=2", "-D", "M=2", "--format", "json")
    (tmp_path / "P.JSON").write_text(out)
    for name, said in (("S.CSV", "ok: S(): 2 ranks"), ("P.JSON", "ok: 1f1b(P=2, M=2): 2 ranks")):
        code, out, err = cli("check", str(tmp_path / name))
        assert code == 0 and out.startswith(said), err
    code, out, err = cli("import", str(tmp_path / "O.TXT"))
    assert code == 0 and "rank 1: 1F0 1B0 1F1 1B1" in out, err


def test_an_execution_plan_given_as_a_schedule_says_how_it_runs(cli, tmp_path):
    """'ppir launch plan.json' and 'ppir check plan.json' (a ppir.plan/2 file) only said that
    it is no ppir.program/1 program."""
    plan = tmp_path / "plan.json"
    code, _, err = cli("compile", "1f1b", "-D", "P=2", "-D", "M=2", "--backend", "cuda",
                       "-o", str(plan))  # fmt: skip
    assert code == 0, err
    code, _, err = cli("check", str(plan))
    assert code == 2
    assert err.splitlines()[1] == (
        "hint: it is an execution plan ('ppir compile --backend cuda'): run it with 'torchrun "
        f"--nproc-per-node 2 -m ppir.run {plan} --module MODULE', or give 'ppir launch' the "
        "schedule it was compiled from"
    )
