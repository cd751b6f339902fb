"""The cost-model backend: closed forms, lower bounds, communication, configs, CLI outputs."""

from __future__ import annotations

import json
import random
import re
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppir.analysis.config import CostConfig, Link, make_config
from ppir.analysis.estimate import estimate
from ppir.diagnostics import PpirError
from ppir.frontend.loader import load_schedule
from ppir.ir import Action, OpKind, Schedule, deps, looped_placement
from ppir.passes import LowerComms
from ppir.pipeline import compile

ROOT = Path(__file__).resolve().parent.parent

UNIFORM = CostConfig()  # F=1, B=2 per rank share, free communication


def _idles(e):
    return [r.idle for r in e.per_rank]


# ------------------------------------------------------------------ closed forms
@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
@pytest.mark.parametrize("progress", ["fifo", "relaxed"])
def test_gpipe_1f1b_bubble_is_exactly_p_minus_1_times_f_plus_b(name, progress):
    for P in (1, 2, 3, 4, 6):
        for M in (1, 2, 3, 8):
            e = estimate(
                load_schedule(name, {"P": P, "M": M}), UNIFORM, progress=progress, memory=False
            )
            assert _idles(e) == [float((P - 1) * 3)] * P, (P, M)
            assert e.step_time == (M + P - 1) * 3
            assert e.bubble_fraction_of_total == pytest.approx((P - 1) / (M + P - 1), abs=0)
            assert e.bubble_fraction_of_ideal == (P - 1) / M


INTERLEAVED_GRID = [(P, M, v) for P in (2, 3, 4) for M in (P, 2 * P, 4 * P) for v in (1, 2, 3, 4)]


@pytest.mark.parametrize("P,M,v", INTERLEAVED_GRID)
def test_interleaved_bubble_is_p_minus_1_times_f_plus_b_over_v(P, M, v):
    s = load_schedule("interleaved_1f1b", {"P": P, "M": M, "v": v})
    closed = Fraction(3 * (P - 1), v)
    # Relaxed progress (recvs posted early, waited on by their consumer): exactly the closed form.
    e = estimate(s, UNIFORM, progress="relaxed", memory=False)
    assert _idles(e) == [float(closed)] * P
    assert e.bubble_fraction_of_ideal == float(closed / (3 * M))
    # FIFO progress: the compute order itself allows exactly the closed form (the dependency
    # bound); the compiled program reaches it, and its critical path is its step.
    f = estimate(s, UNIFORM, progress="fifo", memory=False)
    assert f.dependency_bound == float(3 * M + closed)
    assert f.step_time == f.critical_path == f.dependency_bound


def test_chunks_cost_one_vth_of_a_rank_share():
    e = estimate(load_schedule("interleaved_1f1b", {"P": 2, "M": 2, "v": 3}), memory=False)
    durations = {(o.action.kind, round(o.end - o.start, 12)) for row in e.ops for o in row}
    assert durations == {(OpKind.F, round(1 / 3, 12)), (OpKind.B, round(2 / 3, 12))}
    assert e.per_rank[0].busy == 2 * 3  # M (F + B) per rank, whatever v


# ------------------------------------------------------------------ lower bounds (property)
def _random_schedule(P: int, v: int, M: int, split: bool, rnd: random.Random) -> Schedule:
    """A random linear extension of the dependency DAG, cut into per-rank programs."""
    S = P * v
    bwd = OpKind.I if split else OpKind.B
    ops = [
        Action(s, k, m)
        for s in range(S)
        for m in range(M)
        for k in ((OpKind.F, bwd, OpKind.W) if split else (OpKind.F, bwd))
    ]
    preds = {
        a: {Action(p.stage, bwd if bwd in p.kinds else p.kinds[0], p.mb) for p in deps.inputs(a, S)}
        for a in ops
    }
    done: set = set()
    ready = [a for a in ops if not preds[a]]
    order = []
    while ready:
        a = ready.pop(rnd.randrange(len(ready)))
        order.append(a)
        done.add(a)
        ready.extend(
            b
            for b in ops
            if b not in done and b not in ready and a in preds[b] and preds[b] <= done
        )
    place = looped_placement(P, S)
    progs = tuple(tuple(a for a in order if place[a.stage] == r) for r in range(P))
    return Schedule("random", (("P", P), ("M", M)), P, S, M, place, progs)


@settings(max_examples=25)
@given(
    P=st.integers(1, 4),
    v=st.integers(1, 2),
    M=st.integers(1, 4),
    split=st.booleans(),
    seed=st.integers(0, 2**16),
    b=st.integers(1, 4),
    lat=st.integers(0, 3),
    progress=st.sampled_from(["fifo", "relaxed"]),
)
def test_step_time_is_bounded_below_on_random_valid_schedules(
    P, v, M, split, seed, b, lat, progress
):
    raw = _random_schedule(P, v, M, split, random.Random(seed))
    s = LowerComms().apply(raw)
    cfg = CostConfig(B=Fraction(b), intra=Link(Fraction(lat, 4)), inter=Link(Fraction(lat, 4)))
    e = estimate(s, cfg, progress=progress, memory=False)
    assert e.step_time >= e.busiest
    assert e.step_time == e.critical_path
    compiled = estimate(raw, cfg, progress=progress, memory=False)  # compiled as 'ppir compile'
    assert compiled.step_time >= compiled.dependency_bound
    # overlap never loses against the same lowering blocking (--no-overlap)
    blocking = compile(raw, costs=cfg, progress=progress, overlap=False)
    assert compiled.step_time <= blocking.step_time
    for r in e.per_rank:
        assert r.idle == pytest.approx(e.step_time - r.busy)
        assert 0 <= r.exposed_comm <= r.idle + 1e-12


# ------------------------------------------------------------------ communication and models
def test_latency_adds_exposed_comm_and_messages_are_counted():
    s = load_schedule("1f1b", {"P": 4, "M": 8})
    free = estimate(s, memory=False)
    slow = estimate(s, make_config({"comm": {"latency": "0.25"}}), memory=False)
    assert free.message_count == slow.message_count == 2 * 3 * 8
    assert all(r.exposed_comm == 0 for r in free.per_rank)
    assert slow.step_time > free.step_time
    assert all(r.exposed_comm > 0 for r in slow.per_rank)
    assert free.critical_path < slow.critical_path <= slow.step_time
    for r in slow.per_rank:  # idle splits into message time and pure waiting
        assert r.waiting == pytest.approx(r.idle - r.exposed_comm)


def test_model_durations_follow_flops_and_messages_have_bytes():
    cfg = make_config(
        {"model": {"preset": "gpt2-xl"}, "hardware": {"preset": "A100", "efficiency": 0.5}}
    )
    e = estimate(load_schedule("1f1b", {"P": 4, "M": 4}), cfg)
    L, h, s_, b = 48, 1600, 1024, 1
    flops = (L // 4) * (2 * b * s_ * (4 * h * h + 2 * h * 4 * h) + 4 * b * s_ * s_ * h)
    f = next(o for o in e.ops[0] if o.action.kind is OpKind.F)
    assert f.end - f.start == pytest.approx(flops / (312e12 * 0.5))
    assert e.time_unit == "s"
    assert e.message_bytes == e.message_count * s_ * b * h * 2
    assert e.per_rank[0].peak_bytes > 0


def test_inter_node_hops_cost_more_than_intra_node():
    model = {"model": {"preset": "llama3-8b", "seq": 2048}}
    s = load_schedule("1f1b", {"P": 4, "M": 4})
    one = estimate(s, make_config({**model, "hardware": {"ranks_per_node": 8}}), memory=False)
    spread = estimate(s, make_config({**model, "hardware": {"ranks_per_node": 1}}), memory=False)
    assert spread.step_time > one.step_time
    assert max(m.end - m.start for m in spread.messages) > max(
        m.end - m.start for m in one.messages
    )


def test_stage_weights_slow_the_pipeline():
    s = load_schedule("1f1b", {"P": 4, "M": 4})
    e = estimate(s, make_config({"costs": {"stage_weights": [1, 1, 1, 2]}}), memory=False)
    assert e.per_rank[3].busy == 2 * e.per_rank[0].busy
    assert e.step_time > estimate(s, memory=False).step_time


# ------------------------------------------------------------------ bad configs
@pytest.mark.parametrize(
    "data,kind,text",
    [
        ({"hardware": {"preset": "H10"}}, "unknown-hardware", "did you mean 'H100'"),
        ({"model": {"preset": "lama3-8b"}}, "unknown-model", "did you mean 'llama3-8b'"),
        (
            {"model": {"preset": "llama3-8b"}, "comm": {"inter_bandwidth_gbs": -5}},
            "bad-config",
            "must be positive",
        ),
        ({"costs": {"F": -1}}, "bad-config", "costs.F must be >= 0"),
        ({"comms": {}}, "bad-config", "did you mean 'comm'"),
        ({"hardware": {"rank_per_node": 2}}, "bad-config", "did you mean 'ranks_per_node'"),
        (
            {"model": {"preset": "llama3-8b"}, "hardware": {"efficiency": 1.5}},
            "bad-config",
            "(0, 1]",
        ),
    ],
)
def test_bad_configs_are_diagnostics(data, kind, text):
    with pytest.raises(PpirError) as ei:
        make_config(data)
    assert ei.value.kind == kind and ei.value.exit_code == 2
    assert text in ei.value.render()


@pytest.mark.parametrize("weights,word", [([1, 1, 1], "missing 1"), ([1] * 5, "extra 1")])
def test_stage_weight_count_must_match(weights, word):
    with pytest.raises(PpirError, match=word):
        estimate(
            load_schedule("1f1b", {"P": 4}), make_config({"costs": {"stage_weights": weights}})
        )


# ------------------------------------------------------------------ CLI
def test_compile_cost_text_and_json(cli):
    code, out, err = cli("compile", "1f1b", "-D", "P=4", "-D", "M=8", "--backend", "cost")
    assert code == 0, err
    assert "bubble / total" in out and "bubble / ideal" in out and "critical path" in out
    code, out, _ = cli(
        "compile", "1f1b", "-D", "P=4", "-D", "M=8", "--backend", "cost", "--format", "json"
    )
    doc = json.loads(out)
    assert doc["format"] == "ppir.estimate/2"
    assert doc["step_time"] == 33 and doc["bubble_fraction_of_ideal"] == 3 / 8
    assert doc["bubble_fraction_of_total"] == 9 / 33
    assert [r["idle"] for r in doc["per_rank"]] == [9] * 4
    assert all(r["busy"] == 24 for r in doc["per_rank"])
    code, out, _ = cli(
        "compile", "1f1b", "-D", "P=4", "-D", "M=8", "--backend", "cost", "--format", "json",
        "--model", "llama3-8b",
    )  # fmt: skip
    doc = json.loads(out)  # byte counts are integers, as the footprint's are (not 3.2e9 floats)
    assert type(doc["messages"]["bytes"]) is int and doc["messages"]["bytes"] > 0
    assert all(type(r["peak_bytes"]) is int for r in doc["per_rank"])


def test_the_time_unit_is_one_forward_only_when_a_forward_costs_one(cli, tmp_path):
    base = ("compile", "1f1b", "-D", "P=4", "-D", "M=8", "--backend", "cost")
    code, out, _ = cli(*base, "--cost", "F=1,B=3")  # explicit, and a forward is still 1
    assert code == 0 and "(time unit: one forward); free communication" in out
    assert "1 unit = one forward of a full rank share" in out
    code, out, _ = cli(*base, "--cost", "F=2")
    head, _, step = out.splitlines()[1:4]
    assert code == 0 and "one forward" not in out
    assert head == (
        "assuming uniform costs F=2 B=2 I=1 W=1 per rank share (time unit: the op costs' "
        "unit, in which a forward is 2); free communication"
    )
    assert " ".join(step.split()) == (
        "step time 44 units (the op costs' unit, in which a forward of a full rank share is 2)"
    )
    cfg = tmp_path / "c.toml"
    cfg.write_text("[costs]\nF = 0.5\n")  # a config file's costs: the same unit, not seconds
    code, out, _ = cli(*base, "--config", str(cfg))
    assert code == 0 and "(time unit: the op costs' unit, in which a forward is 0.5)" in out
    code, out, _ = cli(*base, "--cost", "F=2", "--model", "llama3-8b")  # a model: seconds
    assert code == 0 and "F=2 B=2 I=1 W=1 x forward FLOP time" in out and "unit" not in out


def test_compile_cost_bad_flags_exit_2_without_traceback(cli):
    code, _, err = cli(
        "compile", "1f1b", "--backend", "cost", "--hardware", "B300", "--model", "llama3-8b"
    )
    assert code == 2 and "unknown hardware preset 'B300'" in err and "Traceback" not in err
    code, _, err = cli(
        "compile", "1f1b", "--backend", "cost", "--model", "llama3-8b", "--bandwidth", "-1"
    )
    assert code == 2 and "must be positive" in err
    code, _, err = cli("compile", "1f1b", "--backend", "cost", "--stage-weights", "1,2")
    assert code == 2 and "missing 2" in err


def test_trace_has_tracks_slices_and_flows(cli, tmp_path):
    path = tmp_path / "t.json"
    code, _, err = cli(
        "compile",
        "interleaved_1f1b",
        "-D",
        "P=2",
        "-D",
        "M=2",
        "--backend",
        "cost",
        "--comm-latency",
        "0.1",
        "--trace",
        str(path),
    )
    assert code == 0, err
    ev = json.loads(path.read_text())["traceEvents"]
    names = {e["name"] for e in ev if e["ph"] == "X"}
    assert "F1@s2" in names and "B0@s3" in names
    assert {e["args"]["name"] for e in ev if e["name"] == "thread_name"} == {"compute", "comm"}
    starts = [e for e in ev if e["ph"] == "s"]
    assert starts and len(starts) == len([e for e in ev if e["ph"] == "f"])


def test_the_trace_shows_each_gradient_reduction_on_a_track_of_its_rank(cli, tmp_path):
    """With --dp the trace had no slice for the reductions the step time includes: each rank's
    comm track now holds one per stage it reduces, where the timeline runs it (1F1B P=4 M=8,
    messages and reduce steps of 1/4, dp=4: 2 (4-1) x 1/4 = 1.5 units = 1500 us, rank 0's
    ending the step)."""
    path = tmp_path / "t.json"
    argv = ["compile", "1f1b", "-D", "P=4", "-D", "M=8", "--comm-latency", "0.25"]
    code, _, err = cli(*argv, "--dp", "4", "--trace", str(path))
    assert code == 0, err
    ev = json.loads(path.read_text())["traceEvents"]
    red = sorted((e["pid"], e["name"], e["ts"], e["dur"]) for e in ev if e.get("cat") == "reduce")
    assert red == [
        (0, "REDUCE_GRAD@s0", 37000.0, 1500.0),
        (1, "REDUCE_GRAD@s1", 34750.0, 1500.0),
        (2, "REDUCE_GRAD@s2", 32500.0, 1500.0),
        (3, "REDUCE_GRAD@s3", 30250.0, 1500.0),
    ]
    # a track of their own: on the comm track a message would nest inside a reduction
    assert all(e["tid"] == 2 for e in ev if e.get("cat") == "reduce")
    names = {(e["pid"], e["args"]["name"]) for e in ev if e["name"] == "thread_name"}
    assert {(r, "reduce") for r in range(4)} <= names


def test_plot_writes_an_image(cli, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "g.svg"
    code, _, err = cli(
        "compile", "1f1b", "-D", "P=3", "-D", "M=4", "--backend", "cost", "--plot", str(path)
    )
    assert code == 0, err
    assert path.read_text().lstrip().startswith("<?xml")


def test_plot_is_the_chart_viz_draws(cli, tmp_path):
    """compile --plot drew its own chart (no chunk shades, seconds ticked in s under a title in
    ms, the legend over the axis label); it is now viz's, element for element (the SVGs differ
    only in their clip-path ids and dates)."""
    pytest.importorskip("matplotlib")
    argv = ["zbv", "-D", "P=2", "-D", "M=4"]
    a, b = tmp_path / "a.svg", tmp_path / "b.svg"
    assert cli("compile", *argv, "--backend", "cost", "--plot", str(a))[0] == 0
    assert cli("viz", *argv, "-o", str(b))[0] == 0

    def norm(p):
        text = re.sub(r"(#|id=\")([mp])[0-9a-f]{6,}", r"\1\2", p.read_text())  # ids
        return re.sub(r"<dc:date>.*?</dc:date>", "", text)

    assert norm(a) == norm(b) and "darker: later chunk" in a.read_text()


def test_chart_ticks_seconds_in_the_unit_of_its_title(tmp_path):
    """A 15.5 ms step was ticked 0.000 to 0.014 under "time (s)" and a title in ms: the axis
    now says the title's unit and ticks in it."""
    pytest.importorskip("matplotlib")
    import ppir
    from ppir.analysis.config import make_config
    from ppir.viz.layout import gantt_layout

    cfg = make_config({"model": {"preset": "gpt2-xl", "seq": 16}, "hardware": {"preset": "H100"}})
    e = ppir.compile(ppir.load("1f1b", P=2, M=2), costs=cfg).estimate
    lay = gantt_layout(e)
    unit = lay.title.split("step ")[1].split()[1]  # "step 153.2 us   bubble ..."
    assert e.step_time < 1e-3 and unit == "us"
    assert lay.time_label == "time (us)" and lay.time_scale == 1e-6


def test_output_file(cli, tmp_path):
    # was silent, where viz, synth, profile and the other backends say what they wrote
    path = tmp_path / "e.json"
    code, out, err = cli(
        "compile", "gpipe", "--backend", "cost", "--format", "json", "-o", str(path)
    )
    assert code == 0 and out == f"wrote {path}\n" and err == ""
    assert json.loads(path.read_text())["per_rank"][0]["idle"] == 9
    trace = tmp_path / "t.json"
    code, out, err = cli(
        "compile", "gpipe", "--backend", "cost", "-o", str(path), "--trace", str(trace)
    )
    assert out == f"wrote {path}\nwrote {trace} (a Chrome trace: open it in ui.perfetto.dev)\n"
    # the report on stdout (JSON here, piped to jq say): the trace's line goes to stderr
    code, out, err = cli("compile", "gpipe", "--backend", "cost", "--format", "json",
                         "--trace", str(trace))  # fmt: skip
    assert json.loads(out)["per_rank"][0]["idle"] == 9
    assert err == f"wrote {trace} (a Chrome trace: open it in ui.perfetto.dev)\n"


def test_measured_costs_with_a_model_say_the_memory_is_the_models():
    measured = {"stages": 2, "F": [1e-3] * 2, "B": [2e-3] * 2, "I": [1e-3] * 2,
                "W": [1e-3] * 2, "transfer": 1e-4}  # fmt: skip
    alone = make_config({"measured": measured}).describe()
    both = make_config({"measured": measured, "model": {"preset": "llama3-8b"}}).describe()
    assert "memory of model" not in alone
    assert "memory of model llama3-8b, not the measured one" in both


def test_the_critical_path_shows_a_third_ranks_transfers_it_runs_through(cli):
    """1f1b P=4 M=8 under llama3-8b's costs printed F0@s0@r0 -> F1@s0@r0 -> F0@s2@r2, as if
    stage 1 were skipped: F0@s2 waits for F1@s0 through rank 1, whose send of F0's output
    completes after its recv of F1, posted before it (a rank's transfers complete in order)."""
    from ppir.analysis.critical_path import PathLink

    argv = ["compile", "1f1b", "-D", "P=4", "-D", "M=8", "--backend", "cost"]
    e = compile(
        load_schedule("1f1b", {"P": 4, "M": 8}),
        costs=make_config({"model": {"preset": "llama3-8b"}}),
    ).estimate
    assert e.critical_path_links == (PathLink(2, 1, ("1RECV_F1", "1SEND_F0")),)
    code, out, _ = cli(*argv, "--model", "llama3-8b")
    lines = out.splitlines()
    path = lines[next(i for i, x in enumerate(lines) if x.startswith("critical path")) + 1]
    assert code == 0 and path.split()[:6] == ["F0@s0@r0", "->", "F1@s0@r0", "->", "[via", "r1:"]
    assert "1RECV_F1 1SEND_F0] -> F0@s2@r2 -> F0@s3@r3 -> ... (14 more) -> B7@s3@r3" in path
    assert "[via rN: ...]: rank N's transfers on the path" in out
    code, out, _ = cli(*argv, "--model", "llama3-8b", "--format", "json")
    cp = json.loads(out)["critical_path"]
    assert cp["ops"][1:3] == ["F1@s0@r0", "F0@s2@r2"]
    assert cp["links"] == [{"before": 2, "rank": 1, "ops": ["1RECV_F1", "1SEND_F0"]}]
    code, out, _ = cli(*argv)  # free communication: stage to stage, no link, no legend
    assert "F0@s0@r0 -> F0@s1@r1 -> F0@s2@r2" in out and "[via" not in out
    assert json.loads(cli(*argv, "--format", "json")[1])["critical_path"]["links"] == []


def test_bubble_shares_of_a_step_where_every_op_costs_nothing_are_dashes(cli):
    # was 'bubble / total 0.00%' and 'bubble / ideal 0.00%': 0 / 0, where the rank table's
    # idle % already printed '-'
    code, out, err = cli("compile", "1f1b", "--backend", "cost", "--cost", "F=0,B=0,I=0,W=0")
    assert code == 0, err
    lines = out.splitlines()
    assert "bubble / total             -   (idle / step time)" in lines
    assert "bubble / ideal             -   (idle / busy, Narayanan 2021)" in lines
    code, out, _ = cli("compile", "1f1b", "--backend", "cost")
    assert "bubble / total             27.27%   (idle / step time)" in out.splitlines()


def test_a_fractional_peak_of_a_split_backward_says_what_i_and_w_free(cli):
    """'peak act (A) 3.351' under ZB-H1 was left unexplained where 'ppir analyze' says why; an
    interleaved schedule's halves (chunks of 1/v A) get no such note."""
    code, out, err = cli("compile", "zb_h1", "-D", "P=4", "-D", "M=8")
    assert code == 0, err
    assert out.splitlines()[-1] == (
        "note: peak act (A) holds parts of a chunk: split backward: I frees 37/57 of a chunk, "
        "W the rest; on a first stage I does nothing and W frees the whole chunk (ppir analyze "
        "--i-fraction)"
    )
    _, analyzed, _ = cli("analyze", "zb_h1", "-D", "P=4", "-D", "M=8")
    assert "split backward: I frees 37/57 of a chunk, W the rest" in analyzed  # the same split
    code, out, _ = cli("compile", "interleaved_1f1b", "-D", "P=4", "-D", "M=8", "-D", "v=2")
    assert code == 0 and "5.5" in out and "note: peak act" not in out


_interval = st.tuples(st.integers(0, 40), st.integers(0, 12)).map(lambda t: (t[0], t[0] + t[1]))


@given(st.lists(_interval, max_size=8), st.lists(_interval, max_size=8))
def test_uncovered_is_the_union_of_spans_minus_the_cover_point_by_point(spans, cover):
    """``uncovered``, the rule of exposed_comm (the estimator sums it, viz draws it): on an
    integer grid, exactly the unit cells some span holds and no cover interval does, as
    disjoint, ordered, non-empty intervals."""
    from ppir.analysis.exposed import uncovered

    out = uncovered(spans, sorted(cover))
    assert all(a < b for a, b in out) and all(x[1] <= y[0] for x, y in zip(out, out[1:]))
    cells = {t for a, b in out for t in range(a, b)}
    want = {t for a, b in spans for t in range(a, b)} - {t for a, b in cover for t in range(a, b)}
    assert cells == want


def test_a_compared_chart_ticks_every_panel_in_one_unit(tmp_path, monkeypatch):
    """Each panel ticked in the unit of its own step (a 0.47 ms run in us, a 1.4 ms one in
    ms) under one axis label: every panel now ticks in the longest step's unit."""
    pytest.importorskip("matplotlib")
    import ppir
    from ppir.viz import static
    from ppir.viz.layout import gantt_layout

    cfg = make_config({"model": {"preset": "gpt2-xl", "seq": 16}, "hardware": {"preset": "H100"}})
    runs = [ppir.compile(ppir.load("1f1b", P=2, M=m), costs=cfg) for m in (2, 8)]
    assert [gantt_layout(c.estimate).time_scale for c in runs] == [1e-6, 1e-3]  # their own
    seen = []
    real = static.time_ticks
    monkeypatch.setattr(static, "time_ticks", lambda ax, lay: (seen.append(lay), real(ax, lay)))
    static.write_chart([(c.program, c.estimate) for c in runs], str(tmp_path / "c.png"), "png")
    assert [(lay.time_scale, lay.time_label) for lay in seen] == [(1e-3, "time (ms)")] * 2
