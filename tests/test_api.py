"""The Python API: docs/api.md's examples run, and the library and the CLI give identical
numbers for every built-in (step time, bubbles, peak memory, verdict), with and without
communication costs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import ppir
from ppir.schedules import builtin_names

ROOT = Path(__file__).resolve().parent.parent
EXTRA = {"interleaved_vshape": {"v": 2}}


def test_the_api_page_examples_run(capsys):
    text = (ROOT / "docs" / "api.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 5
    namespace: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/api.md block {i + 1}", "exec"), namespace)  # noqa: S102
    capsys.readouterr()


def test_the_readme_api_example_runs():
    text = (ROOT / "README.md").read_text()
    section = text.split("## The Python API", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```python\n(.*?)```", section, re.S)
    namespace: dict = {}
    exec(compile(block, "README.md (The Python API)", "exec"), namespace)  # noqa: S102
    assert namespace["c"].ok and namespace["text"].startswith("schedule")


@pytest.mark.parametrize("name", builtin_names())
@pytest.mark.parametrize("latency", [None, "0.25"])
def test_library_and_cli_agree_on_every_builtin(name, latency, cli):
    params = {"P": 4, "M": 8, **EXTRA.get(name, {})}
    defines = [x for k, v in params.items() for x in ("-D", f"{k}={v}")]
    comm = ["--comm-latency", latency] if latency else []
    code, out, err = cli("compile", name, *defines, *comm, "--format", "json")
    assert code == 0, err
    shown = json.loads(out)
    cfg = ppir.make_config({"comm": {"latency": latency}} if latency else {})
    e = ppir.estimate(ppir.load(name, **params), cfg)
    assert shown["step_time"] == e.step_time
    assert shown["bubble_fraction_of_total"] == e.bubble_fraction_of_total
    assert shown["bubble_fraction_of_ideal"] == e.bubble_fraction_of_ideal
    assert shown["dependency_bound"] == e.dependency_bound
    assert [r["peak_activations"] for r in shown["per_rank"]] == [
        r.peak_activations for r in e.per_rank
    ]
    code, out, _ = cli("check", name, *defines, *comm, "--format", "json")
    assert code == 0 and json.loads(out)["ok"] is ppir.verify(ppir.load(name, **params)).ok
    code, out, _ = cli("analyze", name, *defines, *comm, "--format", "json")
    a = ppir.analyze(ppir.compile(ppir.load(name, **params), costs=cfg))
    assert [r["peak_activations_exact"] for r in json.loads(out)["per_rank"]] == [
        str(m.peak_activations) for m in a.memory.per_rank
    ]


@pytest.mark.parametrize("name, layers", [("1f1b", None), ("zbv", None), ("dualpipe", None),
                                          ("1f1b", 40)])  # fmt: skip
def test_library_and_cli_agree_on_whole_memory(name, layers, cli):
    spec = "llama3-70b,tp=8,dp=8,zero=1,seq=4096"
    argv = ["-D", "P=8", "-D", "M=16", "--model", spec, "--recompute", "selective"]
    argv += ["--layers", str(layers)] if layers else []
    code, out, err = cli("analyze", name, *argv, "--format", "json")
    assert code == 0, err
    a = ppir.analyze(ppir.load(name, P=8, M=16), spec, recompute="selective", layers=layers)
    shown = json.loads(out)["footprint"]
    assert shown["worst_rank"] == a.footprint.worst.rank
    assert [r for r in shown["per_rank"]] == [
        {"rank": r.rank, **r.to_json(), "largest": r.dominant} for r in a.footprint.per_rank
    ]
    assert ppir.analyze(ppir.load(name, P=8, M=16)).footprint is None  # no model: A only


def test_dump_prints_the_program_compile_times(cli):
    code, out, _ = cli("dump", "zb_h1", "-D", "P=4", "-D", "M=8", "--format", "json")
    assert code == 0
    assert ppir.from_json(json.loads(out)) == ppir.compile(ppir.load("zb_h1", P=4, M=8)).program


def test_verify_and_estimate_refuse_a_program_that_cannot_run():
    naive = ppir.lower(ppir.load("1f1b", P=3, M=4), "naive")
    assert not ppir.verify(naive).ok
    with pytest.raises(ppir.PpirError) as e:
        ppir.estimate(naive)
    assert e.value.kind == "deadlock"


@pytest.mark.parametrize("value", ["abc", 2.5, "8", None, True])
def test_load_refuses_a_parameter_that_is_not_an_integer(value):
    with pytest.raises(ppir.PpirError, match="the value of 'M' must be an integer") as e:
        ppir.load("1f1b", P=2, M=value)
    assert e.value.exit_code == 2 and type(value).__name__ in str(e.value)


def test_load_takes_any_integer_type():
    class Index:  # numpy.int64 and friends: integers by operator.index
        def __index__(self):
            return 4

    s = ppir.load("1f1b", P=2, M=Index())
    assert s.microbatches == 4 and type(dict(s.params)["M"]) is int


@pytest.mark.parametrize("value", [2.5, "2", True, None])
def test_load_refuses_a_torch_parameter_that_is_not_an_integer(value):
    """torch:NAME takes the same integer check as a .pps file's parameters."""
    with pytest.raises(ppir.PpirError, match="the value of 'P' must be an integer") as e:
        ppir.load("torch:GPipe", P=value, M=4)
    assert e.value.exit_code == 2 and type(value).__name__ in str(e.value)


def test_load_takes_a_path_object(cli, tmp_path):
    import pathlib

    from ppir.schedules import builtin_source

    pps = tmp_path / "mine.pps"
    pps.write_text(builtin_source("1f1b"))
    assert ppir.load(pps, P=2, M=4) == ppir.load(str(pps), P=2, M=4)
    f = tmp_path / "p.json"
    f.write_text(cli("dump", "1f1b", "-D", "P=2", "-D", "M=2", "--format", "json")[1])
    assert isinstance(f, pathlib.Path) and ppir.load(f).ranks == 2


@pytest.mark.parametrize("spec", [None, 42, b"1f1b", ["1f1b"]])
def test_load_names_a_spec_of_another_type(spec):
    with pytest.raises(ppir.PpirError) as e:
        ppir.load(spec)
    said = str(e.value)
    assert e.value.exit_code == 2 and "spec" in said and type(spec).__name__ in said


def test_estimate_and_verify_of_a_relaxed_compile_use_its_own_progress_model():
    c = ppir.compile(ppir.load("dualpipev", P=4, M=12), progress="relaxed")
    assert ppir.estimate(c) is c.estimate  # not "compile it again" for options never given
    assert ppir.verify(c) is c.report
    with pytest.raises(ValueError, match="compile it again"):
        ppir.estimate(c, progress="fifo")
    assert ppir.estimate(ppir.load("1f1b", P=2, M=2)).step_time == 9  # a schedule: fifo
