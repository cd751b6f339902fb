"""The execution plan (``ppir.plan/2``): built from lowered schedules without torch, faithful
to the IR's order and groups, round-trips through JSON, and validated completely before a
runtime posts anything (schema, rebuilt from its IR, verified, digest)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

import ppir
from ppir.ir import Group, deps, item_actions
from ppir.plan import (
    PLAN_FORMAT,
    PlanError,
    build_plan,
    load_plan,
    plan_digest,
    plan_schedule,
    validate_plan,
)

# a real file: launch refuses a missing --module before anything else
MODEL = str(Path(__file__).resolve().parent.parent / "examples" / "gpt_model.py")

BUILTINS = [
    ("gpipe", {"P": 4, "M": 5}),
    ("1f1b", {"P": 4, "M": 8}),
    ("1f1b", {"P": 3, "M": 2}),
    ("interleaved_1f1b", {"P": 4, "M": 8, "v": 2}),
    ("interleaved_vshape", {"P": 2, "M": 4, "v": 2}),
    ("looped_bfs", {"P": 2, "M": 3, "v": 3}),
    ("zbv", {"P": 2, "M": 3}),
    ("dualpipev", {"P": 2, "M": 4}),
]


def lowered(name, params, overlap=False):
    s = ppir.lower(ppir.load_schedule(name, params))
    if overlap:
        from ppir.passes import OverlapComms

        s = OverlapComms().apply(s)
    return s


def compute_items(plan, r):
    return [i for i in plan["programs"][r] if i["op"] != "reduce"]


@pytest.mark.parametrize("name,params", BUILTINS)
def test_plan_follows_the_ir_item_by_item(name, params):
    s = lowered(name, params)
    plan = build_plan(s)
    assert plan["format"] == PLAN_FORMAT and plan["meta"] is None
    assert plan["stages_of_rank"] == [list(x) for x in s.stages_of_rank]
    for r, prog in enumerate(s.programs):
        ins = iter(compute_items(plan, r))
        for item in prog:
            i = next(ins)
            if isinstance(item, Group) or (hasattr(item, "kind") and item.kind.is_comm):
                assert i["op"] == "group" and i["ir"] == str(item)
                assert [o["ir"] for o in i["ops"]] == [str(a) for a in item_actions(item)]
                assert all(
                    o["peer"] == deps.peer_rank(s.placement, a)
                    for o, a in zip(i["ops"], item_actions(item))
                )
                continue
            for k, a in enumerate(item_actions(item)):
                if k:
                    i = next(ins)
                assert (i["op"], i["stage"], i["mb"], i["ir"]) == (
                    a.kind.value,
                    a.stage,
                    a.mb,
                    str(a),
                )
                assert i["chunk"] == s.stages_of_rank[r].index(a.stage)
        assert next(ins, None) is None


@pytest.mark.parametrize("name,params", BUILTINS)
def test_each_stage_is_reduced_once_right_after_its_last_backward(name, params):
    plan = build_plan(lowered(name, params))
    for r, prog in enumerate(plan["programs"]):
        reduced = [i["stage"] for i in prog if i["op"] == "reduce"]
        assert sorted(reduced) == plan["stages_of_rank"][r]
        for k, ins in enumerate(prog):
            if ins["op"] != "reduce":
                continue
            later = [i for i in prog[k + 1 :] if i.get("stage") == ins["stage"]]
            assert not any(i["op"] in ("F", "B", "I", "W") for i in later)
            before = next(i for i in reversed(prog[:k]) if i["op"] != "reduce")
            assert before["op"] in ("B", "W")


@pytest.mark.parametrize("name,params", BUILTINS)
def test_sends_and_receives_name_the_same_buffers_in_fifo_order(name, params):
    plan = build_plan(lowered(name, params))
    channels: dict[tuple[int, int, str], list[str]] = {}
    for r, prog in enumerate(plan["programs"]):
        for i in prog:
            for o in i.get("ops", ()):
                src, dst = (r, o["peer"]) if o["op"] == "send" else (o["peer"], r)
                channels.setdefault((src, dst, o["op"]), []).append(o["buffer"])
    for (src, dst, op), bufs in channels.items():
        if op == "send":
            assert channels[(src, dst, "recv")] == bufs


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("name,params", BUILTINS)
def test_plans_validate_and_give_back_their_schedule(name, params, overlap):
    from ppir.ir.reduce import place_reduces

    s = lowered(name, params, overlap)
    plan = json.loads(json.dumps(build_plan(s)))
    assert validate_plan(plan) == place_reduces(s)  # the default reductions, now explicit
    assert plan_schedule(plan) == place_reduces(s)
    assert build_plan(place_reduces(s)) == plan


def test_json_round_trip_and_load(tmp_path):
    plan = build_plan(lowered("interleaved_1f1b", {"P": 2, "M": 4, "v": 2}))
    assert json.loads(json.dumps(plan)) == plan
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert load_plan(path) == plan


def test_v_fold_is_a_local_hand_off():
    plan = build_plan(lowered("interleaved_vshape", {"P": 2, "M": 2, "v": 2}))
    fold = [i for i in plan["programs"][1] if i["op"] == "F" and i["stage"] == 1]
    assert fold and all(i["local"] and i["out"] == f"a2.{i['mb']}" for i in fold)
    moved = {o["buffer"] for p in plan["programs"] for i in p for o in i.get("ops", ())}
    assert not any(b.startswith(("a2.", "g2.")) for b in moved)


def test_overlapped_steps_are_marked():
    plan = build_plan(lowered("dualpipev", {"P": 2, "M": 4}))
    parts = [i for p in plan["programs"] for i in p if "overlap" in i]
    assert parts and [i["overlap"] for i in parts[:2]] == [0, 1]
    assert parts[0]["op"] == "F" and parts[1]["op"] in ("B", "I")


def test_split_backward_plan_marks_i_and_w():
    text = """schedule iw()
ranks 2
stages 2
microbatches 1
placement looped
rank 0: 0F0 0SEND_F0 0RECV_B0 0I0 0W0
rank 1: 1RECV_F0 1F0 1I0 1SEND_B0 1W0
"""
    plan = build_plan(ppir.load_text(text, path="iw.pps"))
    assert plan["split_backward"]
    ops = [(i["op"], i.get("grad_in"), i.get("grad_out")) for i in plan["programs"][1]]
    assert ("I", None, "g1.0") in ops and ("W", None, None) in ops
    assert ops[-1] == ("reduce", None, None)  # after the W, the stage's last backward


def test_reading_a_buffer_nothing_provides_is_named():
    s = lowered("1f1b", {"P": 2, "M": 2})
    progs = [
        tuple(it for it in s.programs[0]),
        tuple(it for it in s.programs[1] if str(it) != "[1RECV_F1]"),
    ]
    with pytest.raises(PlanError, match=r"rank 1, instruction #\d+ \(1F1\) reads buffer a1.1"):
        build_plan(s.replace_programs(tuple(progs)))


def test_rejects_unlowered_schedules_and_foreign_json(tmp_path):
    with pytest.raises(PlanError, match="lower it first"):
        build_plan(ppir.load_schedule("1f1b", {"P": 2, "M": 2}))
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"format": "ppir.program/1"}))
    with pytest.raises(PlanError, match="not a ppir.plan/2 plan"):
        load_plan(path)
    path.write_text("{")
    with pytest.raises(PlanError, match=r"x.json:1:2: not JSON"):
        load_plan(path)
    with pytest.raises(PlanError, match="cannot read the plan"):
        load_plan(tmp_path / "missing.json")


# ---------------------------------------------------------------------- tampered plans
def base_plan():
    return build_plan(lowered("1f1b", {"P": 2, "M": 3}))


def resign(plan):
    plan["digest"] = plan_digest(plan)
    return plan


def find(plan, r, text):
    return next(i for i in plan["programs"][r] if i["ir"] == text)


def tamper_field(plan):
    del plan["microbatches"]


def tamper_peer(plan):
    find(plan, 0, "[0SEND_F0]")["ops"][0]["peer"] = 7


def tamper_cross(plan):  # swap the buffers of two sends: wrong gradients if it ran
    a, b = find(plan, 0, "[0SEND_F0]"), find(plan, 0, "[0SEND_F1]")
    a["ops"][0]["buffer"], b["ops"][0]["buffer"] = b["ops"][0]["buffer"], a["ops"][0]["buffer"]


def tamper_empty(plan):
    plan["programs"][1] = []


def tamper_op(plan):
    plan["programs"][1][2]["op"] = "X"


def tamper_ir(plan):
    plan["programs"][1][0]["ir"] = "1RECV_F9x"


def tamper_reduce(plan):
    plan["programs"][0] = [i for i in plan["programs"][0] if i["op"] != "reduce"]


def tamper_order(plan):  # a consistent plan of a program that deadlocks: the rebuild agrees
    prog = plan["programs"][1]
    i = next(k for k, x in enumerate(prog) if x["ir"] == "[1RECV_F0]")
    j = next(k for k, x in enumerate(prog) if x["ir"] == "1F0")
    prog.insert(j + 1, prog.pop(i))


TAMPERED = [
    (tamper_field, False, "the plan lacks the field 'microbatches'"),
    (
        tamper_peer,
        True,
        r"programs\[0\]\[1\] \(\[0SEND_F0\]\)\.ops\[0\]: peer 7 is outside the world of 2 ranks",
    ),
    (
        tamper_cross,
        True,
        r"programs\[0\]\[\d+\] \(\[0SEND_F0\]\)\.ops\[0\]: "
        r"'buffer' is 'a1.1', but the IR item gives 'a1.0'",
    ),
    (tamper_empty, True, r"programs\[1\] is empty, but rank 1 holds stages"),
    (tamper_op, True, r"programs\[1\]\[2\]: unknown op 'X'"),
    (tamper_ir, True, r"programs\[1\]\[0\]\.ir: not an action: '1RECV_F9x'"),
    (tamper_reduce, True, r"does not verify: stage 0 \(rank 0\) is never reduced, but other"),
    (tamper_order, True, r"(does not verify|cannot run)"),
    (lambda plan: plan["programs"][0][0].update(mb=1), False, "'mb' is 1, but the IR item gives 0"),
    (lambda plan: plan["params"].update(M=9), False, "digest does not match"),
]


@pytest.mark.parametrize("tamper,sign,message", TAMPERED, ids=lambda x: getattr(x, "__name__", ""))
def test_tampered_plans_are_refused_naming_the_field(tamper, sign, message):
    plan = copy.deepcopy(base_plan())
    tamper(plan)
    if sign:
        resign(plan)
    with pytest.raises(PlanError, match=message):
        validate_plan(plan)


def test_an_edited_plan_is_refused_by_its_digest():
    plan = base_plan()
    plan["schedule"] = "mine"  # consistent and verified, but not what ppir wrote
    with pytest.raises(PlanError, match="changed after ppir wrote it"):
        validate_plan(plan)
    plan["meta"] = {"boundaries": {}}  # the runtime's metadata is not covered
    assert plan_digest(plan) == plan_digest({**plan, "meta": None})


def test_old_plan_format_says_recompile():
    with pytest.raises(PlanError, match=r"ppir.plan/1.*compile it again"):
        validate_plan({"format": "ppir.plan/1"})


# ---------------------------------------------------------------------- CLI
def test_compile_writes_the_plan_and_prints_how_to_launch(cli, tmp_path):
    out = tmp_path / "plan.json"
    code, stdout, _ = cli(
        "compile", "1f1b", "-D", "P=2", "-D", "M=4", "--backend", "cuda", "-o", str(out)
    )
    assert code == 0
    assert "torchrun --nproc-per-node 2 -m ppir.run" in stdout and str(out) in stdout
    assert "--nnodes N --node-rank K" in stdout
    assert load_plan(out)["ranks"] == 2
    code, stdout, _ = cli(
        "compile", "zbv", "-D", "P=2", "-D", "M=4", "--dp", "2", "--backend", "cuda", "-o", str(out)
    )  # the command starts the replicas it was compiled for
    assert code == 0
    assert f"torchrun --nproc-per-node 4 -m ppir.run {out} --module MODULE --dp 2" in stdout


def test_compile_to_an_unwritable_path_is_refused_before_compiling(cli, tmp_path):
    out = tmp_path / "no" / "p.json"
    code, stdout, err = cli("compile", "1f1b", "-D", "P=2", "--backend", "cuda", "-o", str(out))
    assert code == 2 and stdout == ""  # refused while reading the command line: nothing compiled
    assert err == f"ppir: error: cannot write {out}: no such directory {out.parent}\n"


def test_plans_are_built_without_torch(tmp_path):
    code = f"""
import sys
from ppir.cli import main
assert main(["compile", "1f1b", "-D", "P=2", "--backend", "cuda", "-o", r"{tmp_path}/p.json"]) == 0
import ppir.plan, ppir.torch
from ppir.plan import load_plan
load_plan(r"{tmp_path}/p.json")
assert "torch" not in sys.modules, "writing or validating a plan imported torch"
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def test_launch_help_lists_examples(capsys):
    from ppir.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["launch", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    assert "ppir launch -n 4 1f1b -D M=8 --module examples/gpt_model.py" in out
    for flag in ("--verify-grads", "--dist-backend", "--dp", "--nnodes", "--rdzv-endpoint"):
        assert flag in out


def test_launch_rejects_a_rank_count_the_schedule_cannot_take(cli):
    code, _, err = cli(
        "launch",
        "-n",
        "3",
        "interleaved_1f1b",
        "-D",
        "P=2",
        "-D",
        "M=4",
        "--module",
        "examples/gpt_model.py",
    )
    assert code == 2 and "-n 3: the schedule has 2 ranks" in err
    assert "--dp" not in err  # 3 processes are no whole number of 2-rank pipelines


def test_launch_n_that_fits_data_parallel_replicas_suggests_dp(cli):
    code, _, err = cli(
        "launch", "-n", "4", "1f1b", "-D", "P=2", "--module", "examples/gpt_model.py"
    )
    assert code == 2 and "-n 4: the schedule has 2 ranks" in err
    assert "or --dp 2 for 2 data-parallel replicas" in err


def test_launch_n_sets_p_before_the_requires_are_checked(cli, monkeypatch):
    """interleaved_1f1b requires M % P == 0: with the default P=4, M=2 fails; -n 2 must apply."""
    import ppir.cli.launch as launch

    seen = {}

    class Fake:
        def launch(self, compiled, args):
            seen["ranks"] = compiled.program.ranks
            return 0

        def add_launch_arguments(self, p):
            from ppir.torch.run import add_run_arguments

            add_run_arguments(p)

    monkeypatch.setattr(launch, "_cuda", lambda: Fake())
    code, _, err = cli(
        "launch", "-n", "2", "interleaved_1f1b", "-D", "M=2", "-D", "v=2", "--module", MODEL
    )
    assert code == 0, err
    assert seen == {"ranks": 2}
    code, _, err = cli("launch", "-n", "4", "--dp", "2", "1f1b", "-D", "M=2", "--module", MODEL)
    assert code == 0 and seen == {"ranks": 2}, err


@pytest.mark.parametrize("value", ["0", "-5", "nan", "x"])
def test_launch_timeout_must_be_positive(cli, value):
    with pytest.raises(SystemExit) as exit_:
        cli("launch", "-n", "2", "1f1b", "--module", MODEL, "--timeout", value)
    assert exit_.value.code == 2


@pytest.mark.parametrize("value", ["-0.01", "nan", "inf"])
def test_launch_lr_must_be_a_finite_rate_of_0_or_more(cli, capsys, monkeypatch, value):
    """Was accepted: a negative --lr trained uphill with the default SGD, and nan stopped the
    run at step 1 with 'the loss is nan', as if the model had diverged."""
    import ppir.cli.launch as launch

    cuda = launch._cuda()
    monkeypatch.setattr(cuda, "launch", lambda *a: pytest.fail("launched with --lr " + value))
    with pytest.raises(SystemExit) as exit_:
        cli("launch", "-n", "2", "1f1b", "--module", MODEL, "--lr", value)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --lr: must be a finite learning rate of 0 or more, got {value}" in err


def test_launch_without_torch_is_one_clean_error(cli, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    code, _, err = cli("launch", "-n", "2", "1f1b", "--module", MODEL)
    assert code == 2
    assert err.strip() == "ppir: error: ppir launch needs PyTorch: pip install 'ppir[torch]'"


@pytest.mark.parametrize("n", ["0", "-2"])
def test_launch_refuses_fewer_than_one_process(cli, n):
    # was "-n 0 --dp 1: the number of processes must be a multiple of the replicas" (0 is one)
    code, _, err = cli("launch", "-n", n, "1f1b", "--module", MODEL)
    assert code == 2
    assert err.strip() == f"ppir: error: -n {n}: the number of processes must be at least 1"
    code, _, err = cli("launch", "-n", "4", "--dp", "3", "1f1b", "--module", MODEL)
    assert code == 2 and "-n 4 --dp 3: the number of processes must be a multiple" in err


def test_multi_node_flags_are_checked(cli):
    code, _, err = cli("launch", "-n", "2", "--nnodes", "2", "1f1b", "--module", MODEL)
    assert code == 2 and "needs --rdzv-endpoint HOST:PORT" in err
    code, _, err = cli(
        "launch", "-n", "2", "--nnodes", "2", "--node-rank", "2", "1f1b", "--module", MODEL
    )
    assert code == 2 and "--node-rank 2 is not a node of --nnodes 2" in err


@pytest.mark.parametrize(
    "flag, value", [("--nnodes", "0"), ("--rdzv-timeout", "-1"), ("--rdzv-timeout", "0")]
)
def test_node_counts_and_rendezvous_timeouts_below_one_are_usage_errors(cli, capsys, flag, value):
    """``--nnodes 0`` was blamed on the --node-rank the user never gave ('--node-rank 0 is not
    a node of --nnodes 0'); ``--rdzv-timeout -1`` started the agent, which failed after torch's
    C++ stack on stderr ('timed out after -1000ms'), exit 1."""
    with pytest.raises(SystemExit) as exit_:
        cli("launch", "-n", "2", "1f1b", "--module", MODEL, flag, value)
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and not out
    assert err.splitlines()[-1] == (
        f"ppir launch: error: argument {flag}: must be at least 1, got {value}"
    )


@pytest.mark.parametrize(
    "flags,needle",
    [
        (["--verify-steps", "3"], "--verify-steps needs --verify-grads"),
        (
            ["--steps", "2", "--verify-grads", "--verify-steps", "5"],
            "--verify-steps 5 compares the parameters after that many steps, but the run "
            "trains 2 (--steps)",
        ),
        (
            ["--verify-grads", "--tolerance", "-1"],
            "--tolerance -1: must be a difference of 0 or more",
        ),
        (
            ["--verify-grads", "--tolerance", "nan"],
            "--tolerance nan: must be a difference of 0 or more",
        ),
        (
            ["--module-opt", "layers=2", "--module-opt", "foo"],
            "--module-opt foo: expected KEY=VALUE",
        ),
    ],
)
def test_runtime_options_that_do_not_fit_together_are_refused_before_any_rank(cli, flags, needle):
    """Each rank refused them (one line per rank, then 'died without a Python exception'), or,
    for --verify-steps above --steps, the check silently never ran."""
    code, out, err = cli("launch", "-n", "2", "1f1b", "-D", "M=2", "--module", MODEL, *flags)
    assert code == 2 and err.strip() == f"ppir: error: {needle}" and "ppir launch:" not in out


def test_the_plan_summary_counts_in_the_singular_where_there_is_one():
    """'ppir launch -n 2 --dp 2 1f1b' printed '1 ranks, 1 stages'."""
    from ppir.diagnostics import count
    from ppir.plan import plan_summary

    one = plan_summary(build_plan(ppir.compile(ppir.load("1f1b", P=1, M=1)).program))
    assert one == "1f1b: 1 rank, 1 stage, 1 microbatch, 3 instructions"
    assert (count(4096, "microbatch"), count(2, "pass"), count(1, "box")) == (
        "4,096 microbatches",
        "2 passes",
        "1 box",
    )
