"""Forward-only evaluation: the ``forward-only`` pass, how the verifier, memory, the estimator
and plans treat its output, and ``PipelineRuntime.evaluate`` in one process and across ranks
(against single-process forwards of the same model)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import ppir
from ppir.ir import Action, OpKind
from ppir.ir.printer import format_pps, from_json, to_json
from ppir.passes import ForwardOnly
from ppir.plan import PlanError, build_plan, validate_plan

EVAL = "forward-only,lower-comms,overlap-comms"
ROOT = Path(__file__).resolve().parent.parent
BUILTINS = [
    ("1f1b", {}),
    ("gpipe", {}),
    ("interleaved_1f1b", {"v": 2}),
    ("interleaved_zb", {"v": 2}),
    ("looped_bfs", {"v": 2}),
    ("zb_h1", {}),
    ("zb_h2", {}),
    ("zbv", {}),
    ("v_half", {}),
    ("v_min", {}),
    ("interleaved_vshape", {}),
    ("dualpipev", {"M": 12}),
    ("dualpipe", {}),
]


def forwards(s, r):
    """Rank r's forwards in program order: its actions flattened (an overlapped step gives its
    two parts), the F kept."""
    return [a for a in s.compute_actions(r) if a.kind is OpKind.F]


@pytest.mark.parametrize("name, params", BUILTINS, ids=[n for n, _ in BUILTINS])
def test_every_builtin_evaluates_in_its_training_order(name, params):
    s = ppir.load(name, **{"P": 4, "M": 8, **params})
    c = ppir.compile(s, passes=EVAL)
    assert c.ok, c.report.render()
    assert c.pipeline == EVAL and c.program.forward_only and not s.forward_only
    for r in range(s.ranks):
        assert forwards(c.program, r) == forwards(s, r)
        assert all(a.kind in (OpKind.F,) for a in c.program.compute_actions(r))
    assert c.memory.worst.peak_activations == 0  # an evaluation forward keeps nothing
    assert c.step_time < ppir.compile(s).step_time


def test_evaluation_of_1f1b_takes_the_forward_fill_and_drain():
    c = ppir.compile(ppir.load("1f1b", P=4, M=8), passes=EVAL)
    assert c.step_time == 8 + 4 - 1  # (M + P - 1) forwards of cost 1, free links


def test_a_forward_only_program_needs_every_forward_and_no_backward():
    s = ForwardOnly().apply(ppir.load("1f1b", P=2, M=2))
    progs = list(s.programs)
    progs[1] = tuple(a for a in progs[1] if a != Action(1, OpKind.F, 1))
    report = ppir.verify(s.replace_programs(tuple(progs)))
    msgs = [d.message for d in report.errors]
    assert len(msgs) == 1 and msgs[0].startswith(
        "1F1 is missing: stage 1 (rank 1) never runs the forward of microbatch 1"
    ), msgs


def test_a_training_program_with_only_forwards_still_misses_its_backwards():
    s = ForwardOnly().apply(ppir.load("1f1b", P=2, M=2))
    training = dataclasses.replace(s, forward_only=False)
    missing = sorted(d.message.split()[0] for d in ppir.verify(training).errors)
    assert missing == ["0B0", "0B1", "1B0", "1B1"], missing


def test_the_declaration_round_trips_through_text_and_json(tmp_path):
    s = ppir.compile(ppir.load("interleaved_1f1b", P=2, M=4, v=2), passes=EVAL).program
    text = format_pps(s)
    assert "\nforward_only\n" in text
    back = ppir.load_text(text)
    assert back.forward_only and back == s
    assert from_json(json.loads(json.dumps(to_json(s)))) == s
    with pytest.raises(ValueError, match="forward_only"):
        from_json({**to_json(s), "forward_only": 1})


def test_a_program_block_can_declare_it():
    s = ppir.load_text(
        "schedule fwd(P = 2, M = 3)\nranks P\nstages P\nmicrobatches M\nforward_only\n"
        "program r {\n  for m in 0 .. M { F(m) }\n}\n"
    )
    assert s.forward_only
    assert ppir.compile(s).ok


def test_the_plan_says_it_evaluates_and_validation_holds_it_to_that():
    program = ppir.compile(ppir.load("1f1b", P=2, M=4), passes=EVAL).program
    plan = build_plan(program)
    assert plan["forward_only"] is True
    assert "forward_only" not in build_plan(ppir.compile(ppir.load("1f1b", P=2, M=4)).program)
    validate_plan(plan)
    tampered = {k: v for k, v in plan.items() if k != "forward_only"}
    with pytest.raises(PlanError, match="does not verify: 0B0 is missing"):
        validate_plan(tampered)
    from ppir.plan import plan_digest

    training = build_plan(ppir.compile(ppir.load("1f1b", P=2, M=4)).program)
    odd = {**training, "forward_only": "no"}
    odd["digest"] = plan_digest(odd)
    with pytest.raises(PlanError, match="'forward_only' must be true or false, got 'no'"):
        validate_plan(odd)


def test_the_cli_compiles_an_evaluation_program(cli):
    code, out, err = cli(
        "compile", "1f1b", "-D", "P=4", "-D", "M=8", "-p", EVAL, "--format", "json"
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["step_time"] == 11


# ------------------------------------------------------------------ the runtime, one process
def _local(name="looped_bfs", **params):
    torch = pytest.importorskip("torch")
    from ppir.torch import PipelineRuntime

    s = ppir.load(name, **{"P": 1, "M": 3, "v": 4, **params})
    torch.manual_seed(0)
    stages = [torch.nn.Sequential(torch.nn.Linear(5, 5), torch.nn.Tanh()) for _ in range(s.stages)]
    rt = PipelineRuntime(ppir.compile(s).program, stages, lambda y, t: ((y - t) ** 2).mean())
    return torch, rt, stages


def test_evaluate_gives_the_forward_loss_and_leaves_gradients_alone():
    torch, rt, stages = _local()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(6, 5, generator=g), torch.randn(6, 5, generator=g)
    loss = rt.evaluate(x, y)
    with torch.no_grad():
        ref = []
        for xm, ym in zip(x.chunk(3), y.chunk(3)):
            h = xm
            for m in stages:
                h = m(h)
            ref.append(((h - ym) ** 2).mean())
    assert abs(loss.item() - torch.stack(ref).mean().item()) < 1e-6
    assert not loss.requires_grad
    assert all(p.grad is None for p in rt.parameters())
    assert rt._evaluator.peak_saved == 0
    with torch.no_grad():  # also under no_grad, and again with the same shapes
        assert abs(rt.evaluate(x, y).item() - loss.item()) < 1e-7
    rt.step(x, y)  # training still runs after it
    assert all(p.grad is not None for p in rt.parameters())
    with torch.no_grad():
        for p in rt.parameters():
            p -= 0.1 * p.grad
    assert rt.evaluate(x, y).item() < loss.item()  # and evaluate sees the updated weights


def test_evaluate_checks_its_batch_like_step_and_says_evaluate():
    torch, rt, _ = _local()
    with pytest.raises(ValueError, match="dim 0 must split into 3 equal microbatches"):
        rt.evaluate(torch.zeros(4, 5), torch.zeros(4, 5))
    with pytest.raises(ValueError, match=r"holds stage 0, so evaluate\(\) needs its inputs"):
        rt.evaluate(None, torch.zeros(6, 5))
    from ppir.torch import ShapeMismatch

    rt.evaluate(torch.zeros(6, 5), torch.zeros(6, 5))
    with pytest.raises(ShapeMismatch) as e:
        rt.evaluate(torch.zeros(9, 5), torch.zeros(9, 5))
    msg = str(e.value)
    assert "(at evaluation 1: " in msg and "the first evaluation inferred)" in msg, msg
    assert "make_batch" not in msg


def test_an_evaluation_plan_cannot_train():
    torch = pytest.importorskip("torch")
    from ppir.torch import PipelineRuntime, SetupError

    program = ppir.compile(ppir.load("looped_bfs", P=1, M=3, v=2), passes=EVAL).program
    stages = [torch.nn.Linear(5, 5) for _ in range(2)]
    rt = PipelineRuntime(program, stages, lambda y, t: ((y - t) ** 2).mean())
    with pytest.raises(SetupError, match="this plan has no backward"):
        rt.step(torch.zeros(3, 5), torch.zeros(3, 5))


# ------------------------------------------------------------------ the runtime, two ranks
def two_ranks(worker: str, capfd, *args: str) -> str:
    """What ``tests/WORKER ARGS`` printed on 2 gloo ranks under ppir's launcher (each ok)."""
    pytest.importorskip("torch")
    from ppir.backends.cuda.launch import start

    res = start((str(ROOT / "tests" / worker), *args), 2)
    assert res.ok, res.cause
    return capfd.readouterr().out


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_evaluate_across_ranks_equals_single_process_forwards(capfd):
    out = two_ranks("eval_worker.py", capfd)
    found = {}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            found.update(json.loads(line.split(" ", 2)[2]))
    assert sorted(found) == ["1f1b", "dualpipev", "interleaved_1f1b", "zb_h1", "zbv"], out
    for name, (loss, under_no_grad, ref, after_step) in found.items():
        assert abs(loss - ref) <= 1e-6 * abs(ref), (name, loss, ref)
        assert under_no_grad == loss, name
        assert after_step < loss, name  # one SGD step on this very batch lowers its loss


def test_launch_refuses_an_evaluation_program_before_starting_ranks(cli):
    code, _, err = cli(
        "launch", "-n", "2", "1f1b", "-D", "M=2", "-p", "forward-only,lower-comms",
        "--module", "examples/gpt_model.py",
    )  # fmt: skip
    assert code == 2 and "1f1b is an evaluation program (forward_only: no backward)" in err


def test_check_says_it_verified_an_evaluation_program(cli):
    code, out, _ = cli("check", "1f1b", "-D", "P=2", "-D", "M=2", "-p", EVAL)
    assert code == 0
    assert out.startswith("ok: 1f1b(P=2, M=2): 2 ranks, 2 stages, an evaluation program")


def test_analyze_shows_no_peak_op_for_an_evaluation_program(cli):
    code, out, _ = cli("analyze", "1f1b", "-D", "P=2", "-D", "M=2", "-p", EVAL)
    assert code == 0 and "(#-1)" not in out
    row = next(ln for ln in out.splitlines() if ln.strip().startswith("0*"))
    assert row.split()[1:5] == ["1", "0", "0", "-"], row


def test_the_cuda_backend_says_how_an_evaluation_plan_runs(cli, tmp_path):
    out = tmp_path / "ev.json"
    code, stdout, _ = cli("compile", "1f1b", "-p", EVAL, "--backend", "cuda", "-o", str(out))
    assert code == 0 and out.exists()
    assert "ppir.run and ppir launch train and refuse it" in stdout
    assert "torchrun" not in stdout


def test_passes_must_be_a_pipeline_text():
    with pytest.raises(TypeError, match="passes takes a pipeline text"):
        ppir.compile(ppir.load("1f1b", P=2, M=2), passes=["forward-only", "lower-comms"])


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_rank_that_evaluates_while_its_peer_steps_is_told_why_nobody_answers(capfd, tmp_path):
    out = two_ranks("eval_mismatch_worker.py", capfd, str(tmp_path))
    errors = dict(ln.split(" ", 2)[1:] for ln in out.splitlines() if ln.startswith("ERROR "))
    assert sorted(errors) == ["0", "1"], out
    assert "no answer from rank 1 within the 3 s timeout" in errors["0"], errors["0"]
    assert errors["0"].endswith(
        "; every rank of the pipeline calls evaluate() together: a peer in step() never answers"
    ), errors["0"]
    assert "evaluate()" not in errors["1"], errors["1"]  # the stepping rank cannot know
