"""The IR's gradient reduction across data-parallel replicas (``REDUCE_GRAD``,
:class:`ppir.ir.Reduce`): text and JSON forms, the default placement (``place-reduce``), the
graph's reduce nodes, the verifier's checks, the estimator's ring all-reduce and how much of
it the drain hides, and the plan's reduce instructions."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import ppir
from ppir.analysis.config import Link, make_config
from ppir.analysis.dp import ring_allreduce_time
from ppir.ir import OpKind, Reduce, item_actions
from ppir.ir.graph import REDUCE, build_graph
from ppir.ir.printer import format_pps, from_json, to_json
from ppir.ir.reduce import place_reduces
from ppir.plan import PlanError, build_plan, plan_digest, validate_plan
from ppir.verify import verify

BUILTINS = [
    ("1f1b", {"P": 3, "M": 4}),
    ("interleaved_1f1b", {"P": 2, "M": 4, "v": 2}),
    ("zb_h1", {"P": 3, "M": 4}),
    ("zbv", {"P": 2, "M": 3}),
    ("dualpipev", {"P": 2, "M": 4}),
]


def reduced(name, params):
    c = ppir.compile(ppir.load(name, **params), dp=2)
    assert c.ok, c.report
    return c.program


def test_text_form_round_trips():
    assert str(Reduce(3)) == "3REDUCE_GRAD" and Reduce.parse(" 3REDUCE_GRAD ") == Reduce(3)
    assert item_actions(Reduce(0)) == ()
    with pytest.raises(ValueError, match="not a reduce"):
        Reduce.parse("3REDUCE")


@pytest.mark.parametrize("name,params", BUILTINS)
def test_default_placement_is_right_after_the_last_b_or_w(name, params):
    s = reduced(name, params)
    assert place_reduces(s) is s  # already placed: left as it is
    for r, prog in enumerate(s.programs):
        reduces = [(i, it.stage) for i, it in enumerate(prog) if isinstance(it, Reduce)]
        assert sorted(st for _, st in reduces) == list(s.stages_of_rank[r])
        for i, st in reduces:
            grads = [
                k
                for k, it in enumerate(prog)
                for a in item_actions(it)
                if a.stage == st and a.kind in (OpKind.B, OpKind.W)
            ]
            assert len(grads) == s.microbatches and max(grads) < i
            assert i == max(grads) + 1 or isinstance(prog[i - 1], Reduce)
    assert ppir.load_text(format_pps(s), path="r.pps") == s
    assert from_json(json.loads(json.dumps(to_json(s)))) == s


@pytest.mark.parametrize("name,params", BUILTINS)
@pytest.mark.parametrize("progress", ["fifo", "relaxed"])
def test_programs_with_reductions_verify_and_their_graph_says_what_they_reduce(
    name, params, progress
):
    s = reduced(name, params)
    assert verify(s, progress).ok
    g = build_graph(s, progress)
    nodes = [v for v in range(g.n) if g.kind[v] == REDUCE]
    assert len(nodes) == s.stages
    for v in nodes:
        st = s.programs[g.rank[v]][g.item[v]].stage
        assert len(g.data_in[v]) == s.microbatches
        for u in g.data_in[v]:  # a compute node holding a B or W of the stage (an F&B step too)
            keys = [g.ops[o].key for o in g.node_ops(u)]
            assert any(k[0] == st and k[1] in (OpKind.B, OpKind.W) for k in keys), keys
        # nothing waits for a reduction but the next one on its ring
        assert all(g.kind[w] == REDUCE for w in g.after[v])


def literal(body: str) -> str:
    return "schedule r()\nranks 2\nstages 2\nmicrobatches 2\nplacement looped\n" + body


GOOD = """rank 0: 0F0 [0SEND_F0] 0F1 [0SEND_F1] [0RECV_B0] 0B0 [0RECV_B1] 0B1 0REDUCE_GRAD
rank 1: [1RECV_F0] 1F0 [1RECV_F1] 1B0 [1SEND_B0] 1F1 1B1 [1SEND_B1] 1REDUCE_GRAD
"""


@pytest.mark.parametrize(
    "edit,kind,message",
    [
        (("0B1 0REDUCE_GRAD", "0REDUCE_GRAD 0B1"), "early-reduce",
         "0REDUCE_GRAD comes before 0B1, whose weight gradients it must reduce"),
        ((" 1REDUCE_GRAD", " 1REDUCE_GRAD 1REDUCE_GRAD"), "duplicate-reduce",
         "stage 1 is reduced twice in one step"),
        ((" 1REDUCE_GRAD", ""), "missing-reduce", "stage 1 (rank 1) is never reduced"),
        ((" 1REDUCE_GRAD", " 0REDUCE_GRAD"), "reduce-wrong-rank",
         "0REDUCE_GRAD on rank 1, but stage 0 runs on rank 0"),
    ],
)  # fmt: skip
def test_the_verifier_checks_the_reductions(edit, kind, message):
    assert verify(ppir.load_text(literal(GOOD), path="ok.pps")).ok
    bad = ppir.load_text(literal(GOOD.replace(*edit)), path="bad.pps")
    report = verify(bad)
    found = [d for d in report.errors if d.kind == kind]
    assert found and message in found[0].message, [d.render() for d in report.diagnostics]
    if kind != "missing-reduce":
        assert found[0].span is not None and found[0].span.path == "bad.pps"


def test_ring_all_reduce_is_alpha_beta_over_the_replicas():
    link = Link(latency=0.5, bandwidth=100.0)
    assert ring_allreduce_time(1, 1e6, link) == 0
    assert ring_allreduce_time(4, 800.0, link) == pytest.approx(2 * 3 * (0.5 + 200.0 / 100.0))
    assert ring_allreduce_time(4, 0.0, Link(latency=0.25)) == 1.5


def test_the_drain_hides_what_finishes_before_the_step_would_end():
    """1F1B P=4 M=8, messages and reduce steps of 1/4: ranks 1-3 end their backwards before
    rank 0's last one, so their reductions (2 (D-1) x 1/4 = 1.5 each for D=4) are hidden; rank 0
    ends the step with its last backward, so its reduction is wholly exposed."""
    cfg = make_config({"comm": {"latency": 0.25}})
    one = ppir.compile(ppir.load("1f1b", P=4, M=8), costs=cfg)
    four = ppir.compile(ppir.load("1f1b", P=4, M=8), costs=cfg, dp=4)
    red = four.dp_reduce
    assert one.dp_reduce is None and red.total == (1.5, 1.5, 1.5, 1.5)
    assert red.exposed == (1.5, 0, 0, 0) and red.hidden == (0, 1.5, 1.5, 1.5)
    assert four.step_time == one.step_time + 1.5


def test_a_reduction_on_an_idle_rank_is_exposed_comm_not_waiting_and_the_chart_draws_it():
    """The reductions were counted as waiting (idle with no traffic) and the charts drew them as
    idle.  1F1B P=4 M=8, messages and reduce steps of 1/4, dp=4: each rank's reduction (1.5)
    runs after its last backward, while it computes nothing, so it is exposed comm: rank 0's
    wholly (+1.5), the others' less the quarter during which their last gradient message is
    on the wire too (+1.25); waiting grows by what the step grows less that."""
    from ppir.viz.layout import gantt_layout

    cfg = make_config({"comm": {"latency": 0.25}})
    one = ppir.compile(ppir.load("1f1b", P=4, M=8), costs=cfg).estimate
    four = ppir.compile(ppir.load("1f1b", P=4, M=8), costs=cfg, dp=4).estimate
    grew = [b.exposed_comm - a.exposed_comm for a, b in zip(one.per_rank, four.per_rank)]
    assert grew == [1.5, 1.25, 1.25, 1.25]
    assert [b.waiting - a.waiting for a, b in zip(one.per_rank, four.per_rank)] == [
        0,
        0.25,
        0.25,
        0.25,
    ]
    bars = gantt_layout(four).bars
    for r, row in enumerate(four.per_rank):
        comm = [(b.start, b.end) for b in bars if b.row == r and b.kind == "comm"]
        assert sum(b - a for a, b in comm) == row.exposed_comm
        assert comm[-1] == four.exposed[r][-1]
    ends = [spans[-1] for spans in four.exposed]  # each rank's reduction
    assert ends == [(37.0, 38.5), (34.75, 36.25), (32.5, 34.0), (30.25, 31.75)]


def test_the_estimate_json_carries_the_reduction_the_text_reports(cli):
    """'compile --dp 4 --format json' gave a step time with the reductions in it but neither dp
    nor the reductions, which the text prints as its 'data-parallel reduce' lines."""
    argv = ["compile", "1f1b", "-D", "P=4", "-D", "M=8", "--comm-latency", "0.25"]
    code, out, err = cli(*argv, "--dp", "4", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["step_time"] == 37 + 1.5 and doc["dp_reduce"] == {
        "replicas": 4,
        "copies": 1,
        "links": ["intra-node"] * 4,
        "total": [1.5] * 4,
        "exposed": [1.5, 0, 0, 0],
        "hidden": [0, 1.5, 1.5, 1.5],
    }
    code, out, err = cli(*argv, "--format", "json")
    assert code == 0 and "dp_reduce" not in json.loads(out), err


def test_with_a_model_the_reduction_moves_the_gradient_bytes(cli):
    from ppir.analysis.models import PRESETS

    m = PRESETS["gpt2-xl"]
    code, out, err = cli(
        "compile", "1f1b", "-D", "P=4", "-D", "M=16", "--backend", "cost", "--model", "gpt2-xl",
        "--hardware", "h100", "--dp", "8",
    )  # fmt: skip
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("data-parallel reduce"))
    cfg = make_config({"model": {"preset": "gpt2-xl"}, "hardware": {"preset": "h100"}})
    c = ppir.compile(ppir.load("1f1b", P=4, M=16), costs=cfg, dp=8)
    sharded, replicated = m.layer_params()
    grads = (m.layers // 4 * (sharded + replicated) + m.embedding_params()) * 4  # fp32 grads
    want = ring_allreduce_time(8, grads, c.config.intra)
    assert c.dp_reduce.total[0] == pytest.approx(want)
    assert "ring over 8 replicas, intra-node link" in line and "exposed" in line


def test_dualpipe_sums_its_two_copies_gradients_even_without_data_parallelism(cli):
    """Bidirectional DualPipe holds each stage on ranks r and P-1-r, and the two copies'
    gradients are summed every step (deepseek-ai/DualPipe, examples/example_dualpipe.py at
    commit 7cb1e5e: ``p0.grad += p1all[pp_size - 1 - rank]`` after ``dualpipe_model.step``):
    an all-reduce of 2 x dp members per stage, timed at dp = 1 too; DualPipeV holds each
    stage once."""
    from ppir.analysis.models import PRESETS

    cfg = make_config({"model": {"preset": "llama3-70b", "seq": 4096, "tp": 8}})
    c = ppir.compile(ppir.load("dualpipe", P=8, M=32), costs=cfg)
    reduces = [a for r in range(8) for a in c.program.programs[r] if isinstance(a, Reduce)]
    assert sorted(x.stage for x in reduces) == list(range(16))  # each copy of each stage
    m = PRESETS["llama3-70b"]
    sharded, replicated = m.layer_params()
    middle = 80 // 8 * (sharded / 8 + replicated) * 4  # fp32 gradients of a middle stage
    # stage 3 (rank 3) and its copy (rank 4) sit on different nodes (tp = 8: one rank a node)
    assert c.dp_reduce.copies == 2 and set(c.dp_reduce.links) == {"inter-node"}
    want = ring_allreduce_time(2, middle, c.config.inter)
    assert c.dp_reduce.total[3] == pytest.approx(2 * want)  # rank 3 holds stages 3 and 12
    assert c.dp_reduce.exposed[3] > 0  # the step waits for it
    assert ppir.compile(ppir.load("dualpipev", P=8, M=32), costs=cfg).dp_reduce is None
    code, out, err = cli(
        "compile", "dualpipe", "-D", "P=8", "-D", "M=32", "--backend", "cost",
        "--model", "llama3-70b,seq=4096,tp=8",
    )  # fmt: skip
    assert code == 0, err
    assert "(ring over 2: 2 copies of each stage x 1 replica, inter-node link)" in out


def test_each_rank_is_told_its_own_reduction_link_and_an_evaluation_reduces_nothing(cli):
    from ppir.analysis.config import CostConfig

    # 6 pipeline ranks a node (ranks 0-5, then 6-7); a stage's copies sit on ranks r and 7 - r:
    # both on node 0 for r = 2..5, across the two nodes for r = 0, 1, 6, 7
    c = ppir.compile(ppir.load("dualpipe", P=8, M=16), costs=CostConfig(ranks_per_node=6))
    assert c.dp_reduce.links == ("inter-node",) * 2 + ("intra-node",) * 4 + ("inter-node",) * 2
    for args in (["dualpipe"], ["1f1b", "--dp", "2"]):  # no gradients: nothing to reduce
        code, out, err = cli("compile", *args, "-p", "forward-only,lower-comms")
        assert code == 0, err
        assert "reduce" not in out, out


def test_plans_take_the_programs_reductions():
    s = ppir.load_text(literal(GOOD), path="ok.pps")
    plan = build_plan(s)
    assert [i["ir"] for i in plan["programs"][0][-2:]] == ["0B1", "0REDUCE_GRAD"]
    assert validate_plan(plan) == s
    moved = json.loads(json.dumps(plan))
    prog = moved["programs"][0]
    prog.insert(len(prog) - 2, prog.pop())  # the reduce before the last backward
    moved["digest"] = plan_digest(moved)
    with pytest.raises(PlanError, match="0REDUCE_GRAD comes before 0B1"):
        validate_plan(moved)


@pytest.mark.parametrize(
    "name, params, model",
    [
        ("1f1b", {"P": 4, "M": 8}, "llama3-8b"),  # untied: the last stage holds the head
        ("1f1b", {"P": 1, "M": 2}, "llama3-8b"),  # one stage: embedding and head
        ("zbv", {"P": 2, "M": 4}, "gpt2-xl"),  # tied, rank 0 holds both: one tensor
        ("1f1b", {"P": 4, "M": 8}, "gpt2-xl"),  # tied across ranks: the last keeps a copy
    ],
)
def test_each_rank_reduces_the_gradients_its_memory_holds(name, params, model):
    """A rank's reductions move the gradient bytes its memory footprint counts, the last
    stage's output layer included (it was left out: llama3-8b's last rank reduced 23 % too few
    bytes, and at P = 1 the whole model's reduction was 6.5 % short)."""
    from ppir.analysis.footprint import footprint

    cfg = make_config({"model": {"preset": model, "tp": 1 if model == "gpt2-xl" else 8}})
    s = ppir.load(name, **params)
    c = ppir.compile(s, costs=cfg, dp=8)
    fp = footprint(s, replace(cfg.model, dp=8))
    for r, row in enumerate(fp.per_rank):
        link = c.config.intra if c.dp_reduce.links[r] == "intra-node" else c.config.inter
        want = ring_allreduce_time(8, float(row.grads), link)
        n = len(s.stages_of_rank[r])  # each of the rank's reductions pays the ring's latencies
        want += 2 * 7 * (n - 1) * link.latency
        assert c.dp_reduce.total[r] == pytest.approx(want, rel=1e-9), r
