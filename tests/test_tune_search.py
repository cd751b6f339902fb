"""ppir tune's search: P x dp for a world, whole-memory budget, uneven stages, sound pruning."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ppir
from ppir.analysis.config import make_config
from ppir.analysis.costs import costs_for
from ppir.analysis.layout import balanced_layers, uneven_layers
from ppir.analysis.timeline import run
from ppir.analysis.tune import Space, program_bound, search
from ppir.analysis.units import fmt_time
from ppir.ir.graph import build_graph
from ppir.schedules import builtin_names

SCHEDULES = ["1f1b", "interleaved_1f1b", "zb_h1", "zbv", "gpipe"]


@pytest.fixture(scope="module")
def result():
    cfg = make_config({"model": {"preset": "llama3-8b", "seq": 2048}})
    space = Space(
        world=16, tp=2, global_batch=32, micro_batches=(1, 2), recomputes=("none", "full"), top=4
    )
    return search(SCHEDULES, space, cfg, budget=(30 * 2**30, "bytes")), space


def test_ranked_are_compiled_fit_and_sorted(result):
    cands, space = result
    ranked = [c for c in cands if c.ok]
    assert len(ranked) >= space.top
    assert [c.step_time for c in ranked] == sorted(c.step_time for c in ranked)
    for c in ranked:
        assert c.pp * c.dp * space.tp == space.world
        assert c.peak <= 30 * 2**30 and c.footprint is not None
        assert c.bound <= c.step_time * (1 + 1e-9)  # the bound is a lower bound
        assert c.microbatches == 32 // (c.dp * c.mbs)
    assert {c.v for c in ranked if c.schedule == "zbv"} <= {2}  # V-shaped: two chunks per rank


def test_pruned_cannot_beat_the_top(result):
    cands, space = result
    ranked = sorted(c.step_time for c in cands if c.ok)
    cutoff = ranked[space.top - 1]
    pruned = [c for c in cands if c.why == "pruned"]
    assert pruned and all(c.bound >= cutoff for c in pruned)


def test_rejections_explain_themselves(result):
    cands, _ = result
    why = {c.why for c in cands if not c.ok}
    assert "memory" in why
    mem = next(c for c in cands if c.why == "memory")
    assert "exceeds the budget 30.00 GiB" in mem.reason and "largest term" in mem.reason


def test_a_memory_rejection_quotes_the_peak_or_says_at_least(cli):
    # dualpipe P=2 mbs=2 holds 189.70 GiB before lowering; its compiled program adds 128 MiB of
    # receive buffers, 189.83 GiB as 'ppir compile' reports it: the tune rejection quoted the
    # smaller figure as the peak
    from ppir.analysis.units import fmt_memory

    choice = ["--world", "8", "--pp", "2", "--model", "llama3-8b,seq=4096", "--schedules",
              "dualpipe", "--micro-batch", "2", "--recompute", "none",
              "--even", "--format", "json", "-q"]  # fmt: skip
    code, out, err = cli(
        "compile", "dualpipe", "-D", "P=2", "-D", "M=4", "--backend", "cost", "--model",
        "llama3-8b,seq=4096,mbs=2", "--dp", "4", "--format", "json",
    )  # fmt: skip
    fp = json.loads(out)["footprint"]
    peak = fp["per_rank"][fp["worst_rank"]]["total"]
    code, out, err = cli("tune", *choice, "--gpu-memory", "80GiB")
    assert code == 1, err
    (row,) = json.loads(out)["rejected"]  # rejected before it was compiled
    assert row["rejected"] == "memory" and row["step_time"] is None
    assert row["peak_memory"] < peak  # a lower bound: the receive buffers are missing
    assert row["reason"].startswith(
        f"peak memory at least {fmt_memory(row['peak_memory'])} on rank 0 (largest term: "
        "optimizer; receive buffers not counted: not compiled) exceeds the budget 72.00 GiB"
    )
    # a budget between the two: compiled, then rejected with the compiled peak itself
    code, out, err = cli("tune", *choice, "--memory-budget", "189.75GiB")
    (row,) = json.loads(out)["rejected"]
    assert row["step_time"] is not None and row["peak_memory"] == peak
    # the compiled peak as 'ppir compile' reports it (was 189.83 by chance: 4 digits, not 2
    # decimals, so a peak of 172.66 GiB read 172.7 GiB), the budget in the same form
    assert row["reason"] == (
        "peak memory 189.83 GiB on rank 0 (largest term: optimizer) exceeds the budget 189.75 GiB"
    )
    assert fmt_memory(peak) == "189.83 GiB"
    code, out, err = cli("tune", *choice, "--memory-budget", "189.72GiB")  # was: "peak memory
    (row,) = json.loads(out)["rejected"]  # 189.8 GiB ... the budget 189.7 GiB" (4 digits)
    assert row["peak_memory"] == peak and row["reason"] == (
        "peak memory 189.83 GiB on rank 0 (largest term: optimizer) exceeds the budget 189.72 GiB"
    )
    code, text, err = cli("tune", *choice[:-3], "--memory-budget", "189.75GiB")
    assert "budget 189.75 GiB per GPU" in text  # the header, as the reasons say it
    code, out, err = cli("tune", *choice, "--memory-budget", "189.7GiB")  # before compiling
    (row,) = json.loads(out)["rejected"]
    assert row["step_time"] is None and f"{row['peak_memory'] / 2**30:.6g}" == "189.704"
    assert row["reason"] == (
        "peak memory at least 189.704 GiB on rank 0 (largest term: optimizer; receive buffers "
        "not counted: not compiled) exceeds the budget 189.700 GiB"
    )


def test_compared_sizes_get_the_digits_that_tell_them_apart():
    from ppir.analysis.units import fmt_sizes_apart

    GiB = 2**30
    assert fmt_sizes_apart(189.83 * GiB, 189.75 * GiB, "bytes") == ("189.83 GiB", "189.75 GiB")
    # bytes as fmt_memory prints a peak (ppir compile's, tune's peak mem column): was 172.7 GiB
    assert fmt_sizes_apart(172.66 * GiB, 72 * GiB, "bytes") == ("172.66 GiB", "72.00 GiB")
    assert fmt_sizes_apart(189.704 * GiB, 189.7 * GiB, "bytes") == ("189.704 GiB", "189.700 GiB")
    assert fmt_sizes_apart(6.00001, 6, "A") == ("6.00001 A", "6 A")
    assert fmt_sizes_apart(2 * GiB, 2 * GiB, "bytes") == ("2.00 GiB", "2.00 GiB")  # equal
    # every integer digit, never the exponent form (1.234e+04 A)
    assert fmt_sizes_apart(12345, 12000, "A") == ("12345 A", "12000 A")
    assert fmt_sizes_apart(14540 * GiB, 80 * GiB, "bytes") == ("14540.00 GiB", "80.00 GiB")
    for x in (1.0, 189.75 * GiB, 14540 * GiB):  # the closest floats still read apart
        a, b = fmt_sizes_apart(x + math.ulp(x), x, "A" if x == 1.0 else "bytes")
        assert a != b


def test_uneven_layers_put_fewer_on_the_ends():
    assert uneven_layers(80, 32) == (2,) * 15 + (3,) * 16 + (2,)
    assert sum(uneven_layers(80, 32)) == 80
    assert uneven_layers(10, 4) == (2, 3, 3, 2)
    assert uneven_layers(11, 4) == (3, 3, 3, 2)
    assert uneven_layers(5, 1) == (5,)


def test_uneven_split_is_searched_and_timed():
    cfg = make_config({"model": {"preset": "llama3-8b", "layers": 30, "seq": 1024}})
    space = Space(world=4, tp=1, pps=(4,), global_batch=8, recomputes=("none",), vs=(1,))
    cands = search(["1f1b"], space, cfg)
    splits = {c.stage_layers: c for c in cands}
    assert set(splits) == {(7, 8, 8, 7), (8, 8, 8, 6)}  # the ends smaller; the head balanced
    assert all(c.ok for c in cands)
    assert splits[(8, 8, 8, 6)].step_time < splits[(7, 8, 8, 7)].step_time
    even = search(["1f1b"], Space(**{**space.__dict__, "uneven": False}), cfg)
    assert even[0].why == "divisibility" and "30 layers do not split evenly" in even[0].reason


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.integers(0, 8), st.fractions(0, 5, max_denominator=8))
def test_balanced_layers_minimise_the_slowest_stage(stages, extra, head):
    """Against every split by brute force: the slowest stage (the last one's head counted) is
    as fast as any split makes it, and no split with that slowest stage holds more layers on
    the last stage."""
    from itertools import product

    layers = stages + extra
    got = balanced_layers(layers, stages, head)
    assert len(got) == stages and sum(got) == layers and min(got) >= 1

    def slowest(split):
        return max([*split[:-1], split[-1] + head])

    splits = [x for x in product(range(1, layers + 1), repeat=stages) if sum(x) == layers]
    best = min(map(slowest, splits))
    assert slowest(got) == best
    assert got[-1] == max(x[-1] for x in splits if slowest(x) == best)
    if head == 0 and layers % stages == 0:
        assert got == (layers // stages,) * stages


def test_balanced_split_unloads_the_head_stage_and_tune_times_it_as_compile_does(cli):
    """An even split leaves the last stage slowest (llama3-8b's head: about 2.2 layers of
    forward work at seq 4096); tune also tries the balanced split, finds it faster, and its
    step time is compile's for the same --stage-layers."""
    argv = ["--model", "llama3-8b,seq=4096", "--recompute", "selective"]
    code, out, err = cli("tune", "--world", "8", "--pp", "8", "--tp", "1", "--schedules", "1f1b",
                         "--micro-batch", "1", "--format", "json", *argv)  # fmt: skip
    assert code == 0, err
    rows = {tuple(r["stage_layers"] or ()): r for r in json.loads(out)["ranked"]}
    assert set(rows) == {(), (4, 4, 4, 4, 4, 5, 5, 2)}
    balanced, even = rows[(4, 4, 4, 4, 4, 5, 5, 2)], rows[()]
    assert balanced["step_time"] < 0.9 * even["step_time"]
    for layers, row in (("4x5,5x2,2", balanced), (None, even)):
        more = ["--stage-layers", layers] if layers else []
        code, out, err = cli("compile", "1f1b", "-D", "P=8", "-D", "M=32", "--backend", "cost",
                             "--format", "json", *argv, *more)  # fmt: skip
        assert code == 0, err
        assert json.loads(out)["step_time"] == pytest.approx(row["step_time"], rel=1e-12)
    code, out, err = cli("tune", "--world", "8", "--pp", "8", "--tp", "1", "--schedules", "1f1b",
                         "--micro-batch", "1", "--format", "json", "--even", *argv)  # fmt: skip
    assert [r["stage_layers"] for r in json.loads(out)["ranked"]] == [None]
    # compile's text points at the split: the slowest stage's forward, 4 + 2.23 layers' worth,
    # becomes 5
    compile_argv = ["compile", "1f1b", "-D", "P=8", "-D", "M=32", "--backend", "cost", *argv]
    code, out, err = cli(*compile_argv)
    assert code == 0, err
    assert (
        f"note: --stage-layers 4x5,5x2,2 cuts the step time by "
        f"{1 - balanced['step_time'] / even['step_time']:.1%} to "
        f"{fmt_time(balanced['step_time'], 's')} (compiled with it; the busiest rank's forward "
        "work 20% less, the output layer counted as 2.2 layers on the last stage); ppir tune "
        "tries it\n"
    ) in out
    code, out, err = cli(*compile_argv, "--stage-layers", "4x5,5x2,2")
    assert code == 0 and "note:" not in out, err
    code, out, err = cli(*compile_argv[:-4], "--model", "llama3-70b,seq=4096")
    assert code == 0 and "note:" not in out, err  # 80 = 8 x 10: 10 + 1.2 against 11, a 2% cut
    # counted per rank: a DualPipe rank runs model stages r and P-1-r, so the head's rank also
    # runs the first stage; the split that balances stages (8,9x2,6) would leave the middle
    # ranks 18 layers against 18.1 (the even split's head rank); the one that balances ranks
    # leaves 17.1, and compiled with it the step is faster (3.572 s against 3.656 s)
    dual = ["compile", "dualpipe", "-D", "P=4", "-D", "M=16", "--backend", "cost",
            "--model", "llama3-8b"]  # fmt: skip
    code, out, err = cli(*dual)
    assert code == 0, err
    assert "note: --stage-layers 8x2,9,7,8x2,9,7 cuts the step time by 2.3% to 3.572 s" in out
    times = []
    for more in ([], ["--stage-layers", "8x2,9,7,8x2,9,7"]):
        code, out, err = cli(*dual, *more, "--format", "json")
        assert code == 0, err
        times.append(json.loads(out)["step_time"])
    assert times[1] < times[0]
    code, out, err = cli("compile", "zbv", "-D", "P=4", "-D", "M=8", "--backend", "cost",
                         "--model", "llama3-8b")  # fmt: skip
    assert "note: --stage-layers 4x5,5x2,2 cuts the step time by 7.7% to 1.91 s" in out
    assert "the busiest rank's forward work 11% less" in out


def _step_time(cli, *argv) -> float:
    code, out, err = cli(*argv, "--format", "json")
    assert code == 0, err
    return json.loads(out)["step_time"]


def test_compile_notes_a_split_only_when_compiling_with_it_shortens_the_step(cli):
    """compile's note is checked by compiling with the split: at DualPipe P=4, M=16 the
    rank-balanced split is faster and the note's step time and cut are compile's with that
    --stage-layers; at M=8 the same split still cuts the busiest rank's forward work by 6% but
    makes the step slower (1.862 s against 1.846 s): no note."""
    dual = ["compile", "dualpipe", "-D", "P=4", "--backend", "cost", "--model", "llama3-8b"]
    split = ["--stage-layers", "8x2,9,7,8x2,9,7"]
    code, out, err = cli(*dual, "-D", "M=16")
    assert code == 0, err
    even, balanced = (_step_time(cli, *dual, "-D", "M=16", *more) for more in ([], split))
    assert (
        f"note: --stage-layers 8x2,9,7,8x2,9,7 cuts the step time by "
        f"{1 - balanced / even:.1%} to {fmt_time(balanced, 's')} (compiled with it; the busiest "
        "rank's forward work 6% less, the output layer counted as 2.1 layers on the last "
        "stage); ppir tune tries it\n"
    ) in out
    assert f"step time                  {fmt_time(even, 's')}\n" in out
    code, out, err = cli(*dual, "-D", "M=8")
    assert code == 0, err
    assert "note:" not in out
    even, balanced = (_step_time(cli, *dual, "-D", "M=8", *more) for more in ([], split))
    assert balanced > even  # the split the note would have named: slower


def test_compile_does_not_compile_a_large_program_again_for_its_note(cli, monkeypatch):
    """Over NOTE_OPS compute ops the split is not compiled a second time, and the note says
    so: the forward work it cuts, no step time."""
    from ppir.backends.cost import report

    import ppir.cli.common

    def refuse(*a, **kw):
        raise AssertionError("compiled again")

    monkeypatch.setattr(ppir.cli.common, "compile_again", refuse)
    monkeypatch.setattr(report, "NOTE_OPS", 63)  # 1F1B at P=4, M=8: 64 compute ops
    code, out, err = cli("compile", "1f1b", "-D", "P=4", "-D", "M=8", "--model", "llama3-8b")
    assert code == 0, err
    assert (
        "note: --stage-layers 8,9x2,6 leaves the busiest rank's forward work 11% less, the "
        "output layer counted as 2.1 layers on the last stage; not compiled with it (64 compute "
        "ops, over 63), so its step time is not known: ppir tune compiles it\n"
    ) in out


def test_measured_costs_are_not_searched_for_a_balanced_split():
    """Measured costs time the profiled stages whatever their layers (a model only sizes
    memory), so the balanced split is no faster: it was a second row with the even one's step
    time and peak, shown as a layout that would shorten the slowest stage."""
    import tomllib

    from ppir.analysis.measured import MeasuredCosts

    T = (1e-3,) * 4
    doc = tomllib.loads(MeasuredCosts(4, T, (2e-3,) * 4, T, T, 1e-4).to_toml())
    cfg = make_config({**doc, "model": {"preset": "llama3-8b"}})
    space = Space(world=4, tp=1, pps=(4,), global_batch=8, micro_batches=(1,),
                  recomputes=("none",), top=10)  # fmt: skip
    cands = search(["1f1b"], space, cfg)
    assert [c.stage_layers for c in cands] == [None] and cands[0].ok
    modelled = search(["1f1b"], space, make_config({"model": {"preset": "llama3-8b"}}))
    assert {c.stage_layers for c in modelled} == {None, (8, 9, 9, 6)}  # the model's costs: tried


@pytest.mark.parametrize("name", builtin_names())
@pytest.mark.parametrize("P,M", [(2, 4), (4, 8), (4, 12)])
def test_program_bound_is_below_the_dependency_bound(name, P, M):
    # every built-in, bidirectional DualPipe (two pipelines: a stage waits only for the
    # stages before it in its own pipeline) included
    params = {"P": P, "M": M} | ({"v": 2} if name == "interleaved_1f1b" else {})
    try:
        s = ppir.load_schedule(name, params)
    except ppir.PpirError:
        pytest.skip("the schedule refuses these parameters")
    for cost in ({}, {"B": 3, "I": 1, "W": 2}, {"B": 1, "I": 2, "W": 1}, {"FB": 2}):
        costs = costs_for(s, make_config({"costs": cost}))
        tl = run(build_graph(s), costs)
        assert program_bound(s, costs) <= tl.makespan
    if name == "1f1b":  # exact for 1F1B: (M + P - 1)(F + B)
        costs = costs_for(s, make_config({}))
        assert program_bound(s, costs) == run(build_graph(s), costs).makespan


def test_cli_world_search_json(cli):
    code, out, err = cli(
        "tune", "--world", "8", "--tp", "2", "--gpu-memory", "40GiB", "--reserve", "8GiB",
        "--model", "llama3-8b,seq=1024", "--schedules", "1f1b,zbv", "--top", "3",
        "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["format"] == "ppir.tune/2" and doc["budget"] == 32 * 2**30
    row = doc["ranked"][0]
    for key in ("pp", "dp", "schedule", "v", "mbs", "recompute", "step_time", "peak_memory"):
        assert key in row
    assert row["pp"] * row["dp"] * 2 == 8 and row["peak_memory"] <= 32 * 2**30
    code, out, err = cli("tune", "--world", "6", "--tp", "4", "--model", "llama3-8b")
    assert code == 2 and "--world 6 must be a positive multiple of --tp 4" in err
    code, out, err = cli("tune", "--model", "llama3-8b")
    assert code == 2 and "give --world N" in err


def test_best_first_finds_the_exhaustive_top():
    # the search compiles few programs; the step times of its top are those of compiling all
    from ppir.analysis.config import CostConfig
    from ppir.schedules import builtin_names

    space = Space(world=4, global_batch=16, micro_batches=(1, 2), top=5)
    found = search(builtin_names(), space, CostConfig())
    every = search(builtin_names(), Space(**{**space.__dict__, "top": 10**9}), CostConfig())
    best = [c.step_time for c in found if c.ok][: space.top]
    assert best == sorted(c.step_time for c in every if c.ok)[: space.top]
    compiled = sum(1 for c in found if c.step_time is not None)
    assert compiled < sum(1 for c in every if c.step_time is not None)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_program_bound_never_exceeds_the_dependency_bound(data):
    # random valid compute orders: random placements (several chunks per rank), split
    # backward or not, fused F&B steps, random op costs
    from oracle.programs import compute_orders

    from ppir.analysis.costs import Costs
    from ppir.ir import OpKind

    s = data.draw(compute_orders(P=st.integers(1, 4), M=st.integers(1, 5), v=st.integers(1, 3)))
    kinds = (OpKind.F, OpKind.B, OpKind.I, OpKind.W)
    op = tuple({k: data.draw(st.integers(0, 4)) for k in kinds} for _ in range(s.stages))
    costs = Costs(op, overlap=data.draw(st.sampled_from([None, 1, 2])))
    tl = run(build_graph(s), costs)
    assert tl.complete and program_bound(s, costs) <= tl.makespan
