"""Layer layouts: the text form, the one split rule, and ``tune``'s uneven choices reproduced by
``compile`` / ``analyze --stage-layers`` (the same step time and memory)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ppir
from ppir.analysis.config import make_config
from ppir.analysis.layout import (
    format_stage_layers,
    parse_stage_layers,
    split_layers,
)
from ppir.analysis.tune import Space, search
from ppir.diagnostics import PpirError


@given(st.lists(st.integers(0, 9), min_size=1, max_size=40))
def test_text_form_round_trips(layers):
    text = format_stage_layers(layers)
    assert parse_stage_layers(text) == tuple(layers)
    assert len(text.split(",")) <= len(layers)  # runs are written once


def test_text_form_examples_and_errors():
    assert format_stage_layers((6, 7, 7, 7, 6)) == "6,7x3,6"
    assert parse_stage_layers(" 2x3, 4 ") == (2, 2, 2, 4)
    for bad, entry in (("6,,6", "entry 2 ''"), ("6,7x0", "entry 2 '7x0'"), ("a", "entry 1 'a'")):
        with pytest.raises(PpirError, match=entry):
            parse_stage_layers(bad)


def test_split_checks_count_sum_and_replicas():
    s = ppir.load("1f1b", P=4, M=8)
    assert split_layers(30, s, (7, 8, 8, 7)) == (7, 8, 8, 7)
    assert split_layers(32, s) == (8,) * 4
    with pytest.raises(PpirError, match="needs 4 non-negative counts.*got 3 summing to 23"):
        split_layers(30, s, (7, 8, 8))
    with pytest.raises(PpirError, match="hint: e.g. --stage-layers 7,8x2,7"):
        split_layers(30, s, (7, 8, 8, 8))
    with pytest.raises(PpirError, match="do not split evenly"):
        split_layers(30, s)
    dual = ppir.load("dualpipe", P=4, M=8)  # two pipelines, each a replica of the model
    assert dual.pipelines == 2
    assert split_layers(30, dual, (7, 8, 8, 7) * 2) == (7, 8, 8, 7) * 2
    with pytest.raises(PpirError, match="2 pipelines of 4 stages, each the same counts"):
        split_layers(30, dual, (7, 8, 8, 7, 8, 7, 7, 8))


def test_tune_refuses_stages_without_layers():
    cfg = make_config({"model": {"preset": "llama3-8b", "layers": 6, "seq": 1024}})
    space = Space(world=4, tp=1, pps=(4,), global_batch=8, recomputes=("none",), vs=(2, 1))
    cands = search(["interleaved_1f1b", "1f1b"], space, cfg)
    by = {(c.schedule, c.v): c for c in cands}
    empty = by[("interleaved_1f1b", 2)]
    assert empty.why == "divisibility"
    assert empty.reason == "6 layers cannot fill 8 stages: a stage would hold no layer"
    assert by[("1f1b", 1)].ok and by[("1f1b", 1)].stage_layers == (1, 2, 2, 1)


def test_a_tuned_uneven_choice_is_what_compile_and_analyze_report(cli):
    # tune's layers column, given to --stage-layers, reproduces its step time and peak memory
    code, out, err = cli(
        "tune", "--world", "8", "--tp", "2", "--model", "llama3-8b,layers=30,seq=1024",
        "--schedules", "1f1b,interleaved_1f1b", "--v", "1,2", "--micro-batch", "1",
        "--global-batch", "16", "--format", "json", "--quiet",
    )  # fmt: skip
    assert code == 0, err
    rows = [r for r in json.loads(out)["ranked"] if r["stage_layers"]]
    assert rows
    for row in rows[:2]:
        layout = format_stage_layers(row["stage_layers"])
        args = [
            row["schedule"], "-D", f"P={row['pp']}", "-D", f"M={row['microbatches']}",
            *(["-D", f"v={row['v']}"] if row["schedule"] == "interleaved_1f1b" else []),
            "--model", f"llama3-8b,layers=30,seq=1024,tp=2,dp={row['dp']},mbs=1",
            "--stage-layers", layout, "--recompute", row["recompute"], "--format", "json",
        ]  # fmt: skip
        code, out, err = cli("compile", *args, "--backend", "cost")
        assert code == 0, err
        doc = json.loads(out)
        assert doc["step_time"] == pytest.approx(row["step_time"], rel=1e-12)
        worst = max(r["memory"]["total"] for r in doc["per_rank"])
        assert worst == pytest.approx(row["peak_memory"], rel=1e-9)
        code, out, err = cli("analyze", *args)
        assert code == 0, err
        assert [r["memory"]["total"] for r in json.loads(out)["per_rank"]] == [
            r["memory"]["total"] for r in doc["per_rank"]
        ]


def test_stage_layers_in_a_cost_file(tmp_path, cli):
    f = tmp_path / "c.toml"
    f.write_text('[model]\npreset = "llama3-8b"\nlayers = 30\nstage_layers = [7, 8, 8, 7]\n')
    code, out, err = cli("compile", "1f1b", "-D", "P=4", "-D", "M=8", "--config", str(f))
    assert code == 0 and "step time" in out, err
    f.write_text('[model]\npreset = "llama3-8b"\nstage_layers = [7, "8"]\n')
    code, out, err = cli("compile", "1f1b", "-D", "P=4", "-D", "M=8", "--config", str(f))
    assert code == 2 and "model.stage_layers must be a list of layer counts" in err
    code, out, err = cli("compile", "1f1b", "-D", "P=4", "-D", "M=8", "--stage-layers", "8x4")
    assert code == 2 and "--stage-layers 8x4 needs a model" in err


def test_an_even_layout_keeps_bytes_and_a_measured_file_keeps_the_layout():
    s = ppir.load("1f1b", P=4, M=8)
    even = ppir.compile(s, costs=make_config({"model": {"preset": "llama3-8b"}}))
    given = ppir.compile(
        s, costs=make_config({"model": {"preset": "llama3-8b", "stage_layers": [8] * 4}})
    )
    assert given.memory.per_rank[0].peak_bytes == even.memory.per_rank[0].peak_bytes > 0
    measured = {"stages": 4, "F": [1e-3] * 4, "B": [2e-3] * 4, "I": [1e-3] * 4,
                "W": [1e-3] * 4, "transfer": 1e-4}  # fmt: skip
    cfg = make_config(
        {"measured": measured, "model": {"preset": "llama3-8b", "layers": 30,
                                          "stage_layers": [7, 8, 8, 7]}}
    )  # fmt: skip
    assert cfg.stage_layers == (7, 8, 8, 7)


def test_tune_refuses_a_layout_it_would_replace(cli, tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[model]\npreset = "llama3-8b"\nlayers = 30\nstage_layers = [7, 8, 8, 7]\n')
    code, _, err = cli("tune", "--world", "8", "--config", str(f), "-q")
    assert code == 2 and "tune searches stage_layers itself" in err
