"""Bidirectional DualPipe: two pipelines in opposite directions, each rank holding two stages'
parameters.

Reference: the compute order traced from deepseek-ai/DualPipe's ``DualPipe.step`` (ported in
``tests/peers/dualpipe.py``); the README's bubble (PP/2-1)(F&B + B - 3W) with PP = P stages per
direction, and its PP+1 activations per device.  The IR's side: ``pipelines 2`` makes stages
0..P-1 and P..2P-1 two chains that no microbatch leaves (:mod:`ppir.ir.deps`).
"""

from __future__ import annotations

from fractions import Fraction as Fr

import pytest
from peers.dualpipe import trace

import ppir
from ppir.analysis.config import make_config
from ppir.analysis.memory import analyze_memory
from ppir.diagnostics import PpirError
from ppir.frontend.expand import expand
from ppir.frontend.loader import load_schedule
from ppir.frontend.parser import parse_text
from ppir.ir import Action, OpKind, deps
from ppir.ir.printer import format_pps, from_json, to_json
from ppir.verify import verify

GRID = [(P, M) for P in (2, 4, 6, 8) for M in range(2 * P, 4 * P + 1, 2)]


@pytest.mark.parametrize("P,M", GRID)
def test_orders_equal_dualpipe_step(P, M):
    s = load_schedule("dualpipe", {"P": P, "M": M})
    assert [[str(it) for it in s.programs[r]] for r in range(P)] == trace(P, M)


@pytest.mark.parametrize("P", (2, 4, 6, 8))
@pytest.mark.parametrize("fb", ["sum", "B"])
def test_bubble_is_the_readme_formula(P, fb):
    """Default textbook costs per rank share (a DualPipe chunk is one: F=1, B=2, W=1), F&B the
    sum of its parts or as short as B (perfect overlap); the worst rank's idle time."""
    f, b, w = Fr(1), Fr(2), Fr(1)
    fandb = f + b if fb == "sum" else b
    cfg = make_config({"costs": {"FB": int(fandb)}})
    for M in (2 * P, 4 * P):
        c = ppir.compile(load_schedule("dualpipe", {"P": P, "M": M}), costs=cfg)
        want = (P // 2 - 1) * (fandb + b - 3 * w)
        assert max(r.idle for r in c.estimate.per_rank) == want
        assert c.step_time == c.dependency_bound


@pytest.mark.parametrize("P", (2, 4, 6, 8))
def test_memory_is_pp_plus_one_and_two_stages_of_parameters(P):
    s = load_schedule("dualpipe", {"P": P, "M": 2 * P})
    mem = analyze_memory(s, i_fraction=0)
    assert mem.chunk_size == 1  # a stage is one rank share of the model
    assert [m.peak_activations for m in mem.per_rank] == [P + 1] * P
    assert [m.param_shares for m in mem.per_rank] == [2] * P
    one = analyze_memory(load_schedule("dualpipev", {"P": P, "M": 2 * P}))
    assert [m.param_shares for m in one.per_rank] == [1] * P


def test_deps_stop_at_the_pipeline_boundary():
    S = 8
    assert deps.inputs(Action(4, OpKind.F, 0), S, 2) == ()
    assert deps.inputs(Action(4, OpKind.F, 0), S) == (deps.Producer(3, deps.FORWARD, 0),)
    assert deps.inputs(Action(3, OpKind.B, 0), S, 2) == (deps.Producer(3, deps.FORWARD, 0),)
    assert deps.message_out(Action(3, OpKind.F, 0), S, 2) is None
    assert deps.message_in(Action(4, OpKind.B, 0), S, 2) == deps.Message(True, 5, 4, 0)
    assert deps.model_stage(6, S, 2) == 2 and deps.bounds(5, S, 2) == (4, 8)
    assert not deps.has_boundaries_across_ranks((0, 0, 1, 1), 2)


def test_text_and_json_round_trip():
    c = ppir.compile(load_schedule("dualpipe", {"P": 4, "M": 8}))
    low = c.program
    assert low.pipelines == 2 and "pipelines 2" in format_pps(low)
    assert expand(parse_text(format_pps(low), "x.pps")) == low
    assert from_json(to_json(low)) == low
    assert verify(low).ok


def test_a_message_across_the_boundary_is_an_error():
    text = """ranks 2
stages 4
microbatches 1
pipelines 2
placement vshape
rank 0: 0F0 [0SEND_F0 3RECV_F0] 3F0 3B0 [3SEND_B0 0RECV_B0] 0B0
rank 1: [1RECV_F0 2SEND_F0] 1F0 [1SEND_F0 2RECV_F0] 2F0 2B0 1B0 [2RECV_B0 1SEND_B0]
"""
    report = verify(expand(parse_text(text, "x.pps")))
    kinds = {d.kind for d in report.errors}
    assert "out-of-range" in kinds
    assert any("another pipeline" in d.message for d in report.errors)


@pytest.mark.parametrize(
    "decl,kind",
    [("pipelines 3", "bad-declaration"), ("pipelines 0", "bad-declaration")],
)
def test_pipelines_must_divide_the_stages(decl, kind):
    text = f"ranks 2\nstages 4\nmicrobatches 1\n{decl}\nplacement vshape\nrank 0: 0F0\n"
    with pytest.raises(PpirError) as e:
        expand(parse_text(text, "x.pps"))
    assert e.value.kind == kind and e.value.render().startswith("x.pps:4:1"), e.value.render()


def test_backends_that_run_one_pipeline_say_so(cli):
    code, _, err = cli("compile", "dualpipe", "--backend", "torch-csv")
    assert code == 2 and "torch.distributed.pipelining runs one" in err
    code, _, err = cli("compile", "dualpipe", "--backend", "cuda", "-o", "/dev/null")
    assert code == 2 and "cannot run it yet" in err


def test_analyze_reports_the_parameters(cli):
    code, out, err = cli("analyze", "dualpipe", "-D", "P=4", "-D", "M=8")
    assert code == 0, err
    assert "2 pipelines of 4 stages" in out and "2x the parameters" in out
