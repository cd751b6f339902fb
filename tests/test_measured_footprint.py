"""Whole per-rank memory from measured sizes (ppir.analysis.measured_footprint), and the
commands that print it or budget with it, with a [measured] cost file and no model shape."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from ppir.analysis.footprint import activation_peaks
from ppir.analysis.measured import MeasuredCosts, from_table
from ppir.analysis.measured_footprint import measured_footprint
from ppir.analysis.memory import analyze_memory
from ppir.analysis.toml_file import load_config_file
from ppir.frontend.loader import load_schedule
from ppir.pipeline import compile

ACT, PARAM, OPT, MSG = (1000.0, 3000.0), (500.0, 700.0), (1000.0, 1400.0), (64.0,)


def _measured(**kw) -> MeasuredCosts:
    sizes = dict(activation_bytes=ACT, param_bytes=PARAM, optimizer_bytes=OPT, message_bytes=MSG)
    t = (1e-3, 1e-3)
    return MeasuredCosts(2, t, (2e-3,) * 2, t, t, 1e-4, **{**sizes, **kw})


def test_terms_per_rank_are_the_measured_sizes_weighed_by_the_program():
    """1F1B, P=2, M=4: rank 0 holds 2 microbatches of stage 0 at its peak, rank 1 one of stage
    1; gradients are one per parameter; each rank holds its stage's optimizer state."""
    c = compile(load_schedule("1f1b", {"P": 2, "M": 4}))
    fp = measured_footprint(c.program, _measured(), c.memory)
    r0, r1 = fp.per_rank
    assert (r0.params, r0.grads, r0.optimizer) == (500, 500, 1000)
    assert (r1.params, r1.grads, r1.optimizer) == (700, 700, 1400)
    peaks = [m.peak_activations for m in analyze_memory(c.program).per_rank]
    assert (r0.activations, r1.activations) == (peaks[0] * 1000, peaks[1] * 3000) == (2000, 3000)
    assert r0.buffers == c.memory.per_rank[0].peak_recv * 64
    assert fp.worst.rank == 1 and fp.worst.total == 700 + 700 + 1400 + 3000 + r1.buffers
    assert isinstance(r0.total, Fraction)


def test_frozen_parameters_and_buffers_are_held_but_have_no_gradient(tmp_path):
    """A stage with frozen weights (fine-tuning) or buffers holds them: they count in params,
    not in grads; a file written before frozen_bytes has none; merging stages sums them."""
    c = compile(load_schedule("1f1b", {"P": 2, "M": 4}))
    fp = measured_footprint(c.program, _measured(frozen_bytes=(300.0, 0.0)), c.memory)
    r0, r1 = fp.per_rank
    assert (r0.params, r0.grads, r1.params, r1.grads) == (800, 500, 700, 700)
    assert r0.total == 800 + 500 + 1000 + r0.activations + r0.buffers
    path = tmp_path / "costs.toml"  # the file keeps it, and fit(1) sums it
    path.write_text(_measured(frozen_bytes=(300.0, 5.0)).to_toml())
    m = from_table(load_config_file(str(path))["measured"], str(path))
    assert m.frozen_bytes == (300.0, 5.0) and m.fit(1).frozen_bytes == (305.0,)


def test_without_every_size_there_is_no_figure():
    c = compile(load_schedule("1f1b", {"P": 2, "M": 4}))
    assert measured_footprint(c.program, _measured(optimizer_bytes=()), c.memory) is None


def test_dualpipe_sizes_each_stage_as_the_model_stage_it_runs():
    """Bidirectional DualPipe's 4 stages at P=2 are two copies of the 2-stage model: rank 0
    holds model stage 0 (first pipeline) and model stage 1 (the second pipeline's last stage),
    rank 1 the others; each holds both stages' parameters and optimizer state."""
    c = compile(load_schedule("dualpipe", {"P": 2, "M": 4}))
    assert c.program.pipelines == 2
    fp = measured_footprint(c.program, _measured(), c.memory)
    assert fp.copies == 2
    for r in fp.per_rank:
        assert (r.params, r.grads, r.optimizer) == (1200, 1200, 2400)
    peaks = activation_peaks(c.program, c.memory, [Fraction(b) for b in ACT * 2])
    assert [r.activations for r in fp.per_rank] == [a for a, _ in peaks]


@pytest.fixture
def cost_file(tmp_path):
    m = _measured()
    path = tmp_path / "costs.toml"
    path.write_text(m.to_toml("a hand-written measurement"))
    return str(path)


def test_compile_and_analyze_print_the_same_whole_memory(cli, cost_file):
    argv = ["1f1b", "-D", "P=2", "-D", "M=4", "--config", cost_file, "--format", "json"]
    code, out, err = cli("compile", *argv)
    assert code == 0, err
    compiled = [r["memory"] for r in json.loads(out)["per_rank"]]
    code, out, err = cli("analyze", *argv)
    assert code == 0, err
    analyzed = [r["memory"] for r in json.loads(out)["per_rank"]]
    assert compiled == analyzed and compiled[1]["optimizer"] == 1400
    code, out, err = cli("compile", *argv[:-2])
    assert "whole memory per rank in KiB (measured by ppir profile" in out
    assert "(frozen ones and buffers included), one gradient per trainable parameter" in out


def test_tune_takes_a_byte_budget_with_measured_sizes(cli, cost_file):
    base = ["tune", "-P", "2", "--config", cost_file, "--schedules", "1f1b,gpipe", "-q"]
    code, out, err = cli(*base, "--gpu-memory", "8KiB", "--reserve", "0%", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["memory_unit"] == "bytes"
    assert [c["schedule"] for c in doc["ranked"]] == ["1f1b"]  # gpipe holds all 8 microbatches
    assert doc["ranked"][0]["peak_memory"] == doc["ranked"][0]["memory"]["total"]
    assert [c["schedule"] for c in doc["rejected"]] == ["gpipe"]
    code, _, err = cli(*base, "--memory-budget", "6A")
    assert code == 2 and "the budget is in bytes" in err


def test_a_byte_budget_without_sizes_says_what_gives_them(cli, tmp_path):
    path = tmp_path / "old.toml"
    path.write_text(_measured(optimizer_bytes=()).to_toml())
    code, _, err = cli("tune", "-P", "2", "--config", str(path), "--gpu-memory", "1GiB")
    assert code == 2 and "a budget in bytes needs memory sizes" in err


def test_a_w_that_does_not_follow_its_own_i_costs_the_late_w():
    """ZB-H1 at P=2: rank 0 runs each W right after its I (the profile's W); rank 1 runs W(m)
    after F(m+1) and I(m+1), so those cost W_late (their saved tensors have gone cold)."""
    from ppir.analysis.config import make_config
    from ppir.analysis.timeline import durations
    from ppir.ir.graph import COMPUTE, build_graph

    m = _measured(W_late=(5e-3, 7e-3))
    c = compile(load_schedule("zb_h1", {"P": 2, "M": 4}), costs=make_config({}))
    g = build_graph(c.program.compute_only())
    cfg = make_config({"measured": _table(m)})
    from ppir.analysis.costs import costs_for

    costs = costs_for(c.program, cfg)
    dur = durations(g, costs)
    seen = {}
    for order in g.rank_nodes:
        prev = None
        for v in order:
            if g.kind[v] != COMPUTE:
                continue
            a = g.ops[g.lo[v]]
            if a.kind.value == "W":
                follows = prev is not None and prev.kind.value == "I" and prev.mb == a.mb
                seen[str(a)] = (follows, dur[v])
            prev = a
    late = {k: d for k, (follows, d) in seen.items() if not follows}
    hot = {k: d for k, (follows, d) in seen.items() if follows}
    assert late and hot
    assert all(d == pytest.approx(7e-3 if k.startswith("1") else 5e-3) for k, d in late.items())
    assert all(d == pytest.approx(1e-3) for d in hot.values())
    lowered = durations(c.graph, costs)  # the program that runs: the same Ws are late
    gl = c.graph
    by_op = {str(gl.ops[gl.lo[v]]): lowered[v] for v in range(gl.n) if gl.kind[v] == COMPUTE}
    assert all(by_op[k] == pytest.approx(d) for k, (_, d) in seen.items())
    plain = durations(g, costs_for(c.program, make_config({"measured": _table(_measured())})))
    assert all(
        plain[v] == pytest.approx(1e-3) for v in range(g.n) if g.ops[g.lo[v]].kind.value == "W"
    )


def _table(m: MeasuredCosts) -> dict:
    import tomllib

    return tomllib.loads(m.to_toml())["measured"]


@pytest.mark.parametrize("name, P", [("zb_h2", 2), ("zb_h2", 4), ("zbv", 2), ("zb_h1", 4)])
@pytest.mark.parametrize("late", [0.9e-3, 0.98e-3, 1.2e-3])
def test_the_program_bound_stays_a_lower_bound_with_a_deferred_w(name, P, late):
    """tune prunes by program_bound: it must not exceed the timeline when a deferred W costs
    less than the W (it charged every W the W time, up to 3.9 % above the makespan)."""
    from ppir.analysis.bounds import program_bound
    from ppir.analysis.config import make_config
    from ppir.analysis.costs import costs_for
    from ppir.analysis.timeline import run
    from ppir.ir.graph import build_graph

    s = load_schedule(name, {"P": P, "M": 2 * P}).compute_only()
    S, t = s.stages, (1e-3,) * s.stages
    m = MeasuredCosts(S, t, (2e-3,) * S, t, t, 1e-4, W_late=(late,) * S)
    costs = costs_for(s, make_config({"measured": _table(m)}))
    tl = run(build_graph(s), costs)
    assert tl.complete and program_bound(s, costs) <= tl.makespan + 1e-12


def test_tune_refuses_other_micro_batches_with_measured_costs(cli, cost_file):
    """The measured times and sizes are the profiled microbatch's: mbs=2 was ranked at half the
    step time with the same memory."""
    code, _, err = cli("tune", "-P", "2", "--config", cost_file, "--micro-batch", "1,2")
    assert code == 2 and "measured costs are per profiled microbatch" in err


def test_the_library_sizes_a_program_from_its_measurement_as_analyze_does(cost_file, cli):
    """ppir.analyze of a program compiled with a measured file gives the table 'ppir analyze
    --config' prints (one function behind both)."""
    import ppir
    from ppir.analysis.config import make_config

    cfg = make_config(load_config_file(cost_file), cost_file)
    fp = ppir.analyze(ppir.compile(load_schedule("1f1b", {"P": 2, "M": 4}), costs=cfg)).footprint
    assert [r.params for r in fp.per_rank] == [500, 700]
    code, out, _ = cli("analyze", "1f1b", "-D", "P=2", "-D", "M=4", "--config", cost_file,
                       "--format", "json")  # fmt: skip
    assert code == 0
    assert [r["memory"]["total"] for r in json.loads(out)["per_rank"]] == [
        r.to_json()["total"] for r in fp.per_rank
    ]


@pytest.mark.parametrize("flag", ["--gpu-memory", "--memory-budget"])
def test_when_nothing_fits_the_hint_names_the_budget_flag_given(cli, cost_file, flag):
    """was: '--gpu-memory 4KiB' with measured sizes hinted 'try a larger --memory-budget', a
    flag the user had not given (and with --model, '--memory-budget' hinted --gpu-memory)."""
    reserve = ["--reserve", "0%"] if flag == "--gpu-memory" else []
    code, out, err = cli("tune", "-P", "2", "--config", cost_file, flag, "4KiB", *reserve, "-q")
    assert code == 1, err
    assert (
        "(no feasible choice): every choice exceeds the memory budget; "
        f"try a larger {flag}\n" in out
    )
    other = {"--gpu-memory", "--memory-budget"} - {flag}
    code, out, err = cli("tune", "--model", "llama3-8b", "--world", "8", flag, "10GiB", "-q")
    assert code == 1, err
    assert f"more GPUs (--world), or a larger {flag}\n" in out  # it tried full recomputation
    assert not any(o in out for o in other)
