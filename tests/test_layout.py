"""Layer layouts: the text form, the one split rule, and ``tune``'s uneven choices reproduced by
``compile`` / ``analyze --stage-layers`` (the same step time and memory)."""

from __future__ import annotations

import json
from fractions import Fraction
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ppir
from ppir.analysis.config import make_config
from ppir.analysis.layout import (
    balanced_layers,
    busiest_rank,
    format_stage_layers,
    parse_stage_layers,
    rank_balanced_layers,
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
    with pytest.raises(PpirError, match="the same in every pipeline") as e:
        split_layers(30, dual, (7, 8, 8, 7, 8, 7, 7, 8))
    # one pipeline's counts alone: the message said "summing to the model's 30 layers", which
    # they do; it now says each pipeline's counts make the model, and shows a layout it takes
    with pytest.raises(PpirError) as e:
        split_layers(30, dual, (7, 8, 8, 7))
    (d,) = e.value.diagnostics
    assert "each pipeline's 4 counts summing to the model's 30 layers" in d.message
    assert d.hints == ("e.g. --stage-layers 7,8x2,7x2,8x2,7",)  # 7,8,8,7 in each pipeline


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


# each placement a rank may hold several stages of: one stage per rank, looped, V, DualPipe's
_PLACED = [("1f1b", {"P": 3}), ("interleaved_1f1b", {"P": 2, "v": 3}), ("zbv", {"P": 2}),
           ("zbv", {"P": 3}), ("dualpipe", {"P": 4}), ("dualpipe", {"P": 2})]  # fmt: skip


def _compositions(layers: int, parts: int):
    for cuts in combinations(range(1, layers), parts - 1):
        ends = (0, *cuts, layers)
        yield tuple(b - a for a, b in zip(ends, ends[1:]))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(_PLACED), st.integers(0, 6), st.fractions(0, 4, max_denominator=5))
def test_the_rank_balanced_split_leaves_the_busiest_rank_the_least_work(placed, extra, head):
    """Against every split by brute force: the busiest rank (its stages' layers summed, the
    head on each last stage) has as little forward work as any split leaves it; and where the
    stage-balanced split already does that (every schedule of one stage per rank), it is
    kept.  Was: DualPipe and V placements got the stage-balanced split, which left a rank
    holding two middle stages busier than it need be."""
    name, params = placed
    s = ppir.load(name, M=4 * params["P"], **params)
    span = s.stages // s.pipelines
    layers = span + extra
    got = rank_balanced_layers(layers, s, head)
    assert len(got) == span and sum(got) == layers and min(got) >= 1
    best = min(busiest_rank(s, x, head) for x in _compositions(layers, span))
    assert busiest_rank(s, got, head) == best
    stages = balanced_layers(layers, span, head)
    if busiest_rank(s, stages, head) == best:
        assert got == stages


def test_dualpipes_balanced_split_balances_ranks_not_stages():
    """DualPipe's rank r runs model stages r and P-1-r: Llama 3 8B's 32 layers and a head of
    about 2.1 layers go 8,8,9,7 (ranks 0 and 3: 15 layers and the head; 1 and 2: 17), not
    the stage-balanced 8,9,9,6, which left ranks 1 and 2 18 layers."""
    s = ppir.load("dualpipe", P=4, M=16)
    head = Fraction(21, 10)
    assert balanced_layers(32, 4, head) == (8, 9, 9, 6)
    assert rank_balanced_layers(32, s, head) == (8, 8, 9, 7)
    assert busiest_rank(s, (8, 8, 9, 7), head) == 17 + Fraction(1, 10)
    one = ppir.load("1f1b", P=4, M=8)  # one stage per rank: the stage-balanced split
    assert rank_balanced_layers(32, one, head) == balanced_layers(32, 4, head) == (8, 9, 9, 6)


def test_tune_ranks_dualpipes_rank_balanced_split_first_as_compile_times_it(cli):
    """Was: tune tried DualPipe with the even split (1.828 s) and the stage-balanced 8,9x2,6
    (1.862 s), never the faster split that balances ranks; now that one ranks first, and its
    step time and peak memory are compile's for the same --stage-layers."""
    code, out, err = cli("tune", "-P", "4", "--tp", "2", "--model", "llama3-8b",
                         "--schedules", "dualpipe", "--micro-batch", "1", "--recompute", "none",
                         "--format", "json", "--quiet")  # fmt: skip
    assert code == 0, err
    ranked = json.loads(out)["ranked"]
    assert [tuple(r["stage_layers"] or ()) for r in ranked] == [(8, 8, 9, 7) * 2, ()]
    assert ranked[0]["step_time"] < ranked[1]["step_time"]
    for row in ranked:
        layers = row["stage_layers"]
        more = ["--stage-layers", format_stage_layers(layers)] if layers else []
        code, out, err = cli("compile", "dualpipe", "-D", "P=4", "-D", f"M={row['microbatches']}",
                             "--backend", "cost", "--model", "llama3-8b,tp=2", "--format", "json",
                             *more)  # fmt: skip
        assert code == 0, err
        doc = json.loads(out)
        assert doc["step_time"] == pytest.approx(row["step_time"], rel=1e-12)
        worst = max(r["memory"]["total"] for r in doc["per_rank"])
        assert worst == pytest.approx(row["peak_memory"], rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 4),
    st.integers(0, 6),
    st.fractions(0, 4, max_denominator=5),
    st.lists(st.fractions(Fraction(1, 2), 3, max_denominator=4), min_size=4, max_size=4),
)
def test_the_rank_balanced_split_weighs_the_stages(P, extra, head, weights):
    """With --stage-weights (one per stage, a rank holding one), against every split by brute
    force: the busiest rank's weighted forward work is the least any split leaves.  Was: the
    split was balanced without the weights and only compared with them, so a heavy first stage
    kept its layers."""
    s = ppir.load("1f1b", P=P, M=2 * P)
    w = tuple(weights[:P])
    layers = P + extra
    got = rank_balanced_layers(layers, s, head, w)
    assert len(got) == P and sum(got) == layers and min(got) >= 1
    best = min(busiest_rank(s, x, head, w) for x in _compositions(layers, P))
    assert busiest_rank(s, got, head, w) == best


def test_stage_weights_move_layers_off_a_heavy_stage_in_tune_and_compile(cli):
    """A first stage twice as slow per layer (--stage-weights 2,1,1,1): the split balanced
    without the weights, 8,9x2,6, left it 16 layers' work, as the even split does, so compile
    noted nothing and tune's second row was the even one's time again; weighed, 5,10x2,7
    leaves the busiest rank 10.1, compile notes it, tune ranks it first, at compile's time."""
    argv = ["--model", "llama3-8b", "--stage-weights", "2,1,1,1"]
    s = ppir.load("1f1b", P=4, M=16)
    assert rank_balanced_layers(32, s, Fraction(21, 10), (2, 1, 1, 1)) == (5, 10, 10, 7)
    code, out, err = cli("tune", "-P", "4", "--schedules", "1f1b", "--micro-batch", "1",
                         "--recompute", "none", "--format", "json", "-q", *argv)  # fmt: skip
    assert code == 0, err
    ranked = json.loads(out)["ranked"]
    assert [r["stage_layers"] for r in ranked] == [[5, 10, 10, 7], None]
    compile_argv = ["compile", "1f1b", "-D", "P=4", "-D", "M=16", *argv]
    code, out, err = cli(*compile_argv)
    assert code == 0, err
    assert "note: --stage-layers 5,10x2,7 cuts the step time by " in out
    assert "the busiest rank's forward work 38% less" in out
    code, out, err = cli(*compile_argv, "--stage-layers", "5,10x2,7", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["step_time"] == pytest.approx(ranked[0]["step_time"], rel=1e-12)
