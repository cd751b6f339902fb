"""One data-parallel size (``--dp`` and the model's ``dp=``), and where the ranks sit: pipeline
ranks per node from the GPUs a rank and its replicas span (tp x dp), the data-parallel ring's
link, and tune's step times with their gradient reductions, as compile times them."""

from __future__ import annotations

import json

import pytest

from ppir.analysis.config import make_config
from ppir.analysis.nodes import dp_ring_within_node, pipeline_ranks_per_node
from ppir.analysis.tune import Space, search

MODEL = "llama3-70b,tp=8,seq=4096"
ARGS = ("1f1b", "-D", "P=8", "-D", "M=32", "--backend", "cost", "--format", "json")


def config(**model):
    return make_config({"model": {"preset": "llama3-8b", **model}})


def test_ranks_per_node_follow_tp_and_dp():
    assert pipeline_ranks_per_node(make_config({})) == 8  # no model: a GPU per rank
    assert pipeline_ranks_per_node(config()) == 8
    assert pipeline_ranks_per_node(config(tp=8)) == 1
    assert pipeline_ranks_per_node(config(tp=2, dp=2)) == 2
    assert pipeline_ranks_per_node(config(tp=4, dp=4)) == 1  # a rank spans two nodes
    explicit = make_config(
        {"model": {"preset": "llama3-8b", "tp": 8}, "hardware": {"ranks_per_node": 4}}
    )
    assert pipeline_ranks_per_node(explicit) == 4
    four = make_config(
        {"model": {"preset": "llama3-8b", "tp": 2}, "hardware": {"gpus_per_node": 4}}
    )
    assert pipeline_ranks_per_node(four) == 2
    assert dp_ring_within_node(config(tp=2), 4) and not dp_ring_within_node(config(tp=8), 2)


def test_tp8_messages_and_rings_cross_nodes(cli):
    code, out, err = cli("compile", *ARGS[:7], "--model", MODEL + ",dp=4")
    assert code == 0, err
    assert "comm 1 rank/node" in out
    assert "ring over 4 replicas, inter-node link" in out  # 32 GPUs: beyond one node
    code, out, err = cli("compile", *ARGS[:7], "--model", "llama3-8b,seq=4096,dp=4")
    assert code == 0 and "comm 2 ranks/node" in out and "intra-node link" in out, err


def test_dp_flag_and_model_dp_are_one_size(cli):
    code, _, err = cli("compile", *ARGS, "--model", MODEL + ",dp=2", "--dp", "4")
    assert code == 2 and "--dp 4 and the model's dp=2 disagree" in err
    code, out, err = cli("compile", *ARGS, "--model", MODEL + ",dp=4")
    by_model = json.loads(out)
    code, out, err = cli("compile", *ARGS, "--model", MODEL, "--dp", "4")
    by_flag = json.loads(out)
    assert by_model["step_time"] == by_flag["step_time"]  # the reduction timed either way
    code, out, err = cli("compile", *ARGS, "--model", MODEL + ",zero=1", "--dp", "4")
    assert json.loads(out)["footprint"]["bytes_per_param"] == 6 + 12 / 4  # ZeRO over --dp
    code, out, err = cli("compile", *ARGS, "--model", MODEL)
    assert json.loads(out)["step_time"] < by_flag["step_time"]
    code, out, err = cli("analyze", *ARGS[:5], "--model", MODEL + ",zero=1", "--dp", "8")
    assert code == 0 and "dp=8 ZeRO-1" in out, err


def test_tune_times_the_reduction_compile_times():
    cfg = make_config({"model": {"preset": "llama3-8b", "seq": 1024, "tp": 2}})
    space = Space(world=8, tp=2, pps=(2,), global_batch=16, micro_batches=(1,), vs=(1,))
    c = next(c for c in search(["1f1b"], space, cfg) if c.ok)
    assert c.dp == 2
    from dataclasses import replace

    from ppir import compile, load

    s = load("1f1b", P=2, M=c.microbatches)
    with_reduce = compile(s, costs=c.config, dp=2).step_time * c.scale
    by_model = compile(s, costs=c.config).step_time * c.scale  # the model's dp=2 gives it
    one = replace(c.config, model=replace(c.config.model, dp=1))
    without = compile(s, costs=one).step_time * c.scale
    assert c.step_time == pytest.approx(with_reduce, rel=1e-12) == by_model
    assert without < with_reduce


def test_the_library_has_the_same_one_size():
    from ppir import PpirError, compile, load

    s = load("1f1b", P=8, M=32)
    by_model = compile(s, costs=config(dp=4))
    assert by_model.dp == 4 and by_model.dp_reduce is not None
    by_arg = compile(s, costs=config(zero=1), dp=4)
    assert by_arg.config.model.dp == 4  # ZeRO shards over it, and the ranks sit by it
    assert by_arg.step_time == by_model.step_time
    with pytest.raises(PpirError, match="dp=4 and the model's dp=2 disagree"):
        compile(s, costs=config(dp=2), dp=4)


def test_launch_refuses_a_model_dp_it_would_not_start(cli, tmp_path):
    pytest.importorskip("torch")
    f = tmp_path / "cost.toml"
    f.write_text('[model]\npreset = "llama3-8b"\ndp = 2\n')
    code, _, err = cli(
        "launch", "-n", "2", "1f1b", "-D", "M=4", "--module", "examples/gpt_model.py",
        "--config", str(f),
    )  # fmt: skip
    assert code == 2 and "the model's dp=2 asks for 2 data-parallel replicas: give --dp 2" in err


@pytest.mark.parametrize("name", ["1f1b", "interleaved_1f1b", "zb_h1", "zbv", "dualpipe"])
@pytest.mark.parametrize("dp", [2, 8])
def test_the_reduction_bound_is_below_every_compiled_step(name, dp):
    # the tune search prunes with it: it must never exceed what compile then times
    from ppir import compile, load
    from ppir.analysis.costs import costs_for
    from ppir.analysis.dp import reduction_bound, with_dp
    from ppir.analysis.timeline import dependency_bound, run
    from ppir.ir.graph import build_graph

    s = load(name, P=4, M=8, **({"v": 2} if name == "interleaved_1f1b" else {}))
    cfg = config(tp=8 if dp == 8 else 1, dp=dp)
    c = with_dp(costs_for(s, cfg), s, cfg, dp)
    tl = run(build_graph(s), c)
    bound = c.to_time(max(dependency_bound(tl), reduction_bound(tl)))
    step = compile(s, costs=cfg).step_time
    assert reduction_bound(tl) > dependency_bound(tl) or dp == 2  # it bites at tp x dp = 64
    assert bound <= step * (1 + 1e-12)


def test_tune_says_the_ranks_per_node_its_choices_are_timed_with(cli):
    """was: 'ppir tune --world 16 --tp 2 -P 2' (dp = 4: one pipeline rank per 8-GPU node)
    said 'comm 4 ranks/node', the count at dp = 1, while each choice was timed, as 'ppir
    compile' times it, with 1 rank per node."""
    tune = ("tune", "--world", "16", "--tp", "2", "--model", "llama3-8b", "--gpu-memory", "80GiB")
    code, out, err = cli(*tune, "-P", "2", "--schedules", "1f1b", "-q", "--top", "1")
    assert code == 0, err
    code, compiled, err = cli(
        "compile", *ARGS[:2], "P=2", *ARGS[3:7], "--model", "llama3-8b,tp=2,dp=4"
    )
    assert code == 0, err
    assert "; comm 1 rank/node," in out.splitlines()[0] and "; comm 1 rank/node," in compiled
    code, out, err = cli(*tune, "--schedules", "1f1b", "-q", "--top", "1", "--format", "json")
    doc = json.loads(out)
    parts = ("ranked", "slower", "pruned", "rejected")
    assert {c["dp"] for part in parts for c in doc[part]} == {1, 2, 4, 8}  # 4, 2, 1, 1 per node
    assert "; comm 1 to 4 ranks/node (8 GPUs / (tp x dp))," in doc["assumptions"]
