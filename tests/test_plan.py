"""The cuda backend's execution plan (``ppir.plan/1``): built from lowered schedules without
torch, faithful to the IR's order and groups, round-trips through JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from ppir.backends.cuda import PLAN_FORMAT, PlanError, build_plan, check_plan, load_plan

import ppir
from ppir.ir import Group, deps, item_actions

BUILTINS = [
    ("gpipe", {"P": 4, "M": 5}),
    ("1f1b", {"P": 4, "M": 8}),
    ("1f1b", {"P": 3, "M": 2}),
    ("interleaved_1f1b", {"P": 4, "M": 8, "v": 2}),
    ("interleaved_vshape", {"P": 2, "M": 4, "v": 2}),
    ("looped_bfs", {"P": 2, "M": 3, "v": 3}),
]


def lowered(name, params):
    return ppir.lower(ppir.load_schedule(name, params))


@pytest.mark.parametrize("name,params", BUILTINS)
def test_plan_follows_the_ir_item_by_item(name, params):
    s = lowered(name, params)
    plan = build_plan(s)
    assert plan["format"] == PLAN_FORMAT and plan["meta"] is None
    assert plan["stages_of_rank"] == [list(x) for x in s.stages_of_rank]
    for r, prog in enumerate(s.programs):
        ins = plan["programs"][r]
        assert len(ins) == len(prog)
        for item, i in zip(prog, ins):
            assert i["ir"] == str(item)
            if isinstance(item, Group) or item.kind.is_comm:
                assert i["op"] == "group"
                assert [o["ir"] for o in i["ops"]] == [str(a) for a in item_actions(item)]
                assert all(
                    o["peer"] == deps.peer_rank(s.placement, a)
                    for o, a in zip(i["ops"], item_actions(item))
                )
            else:
                assert (i["op"], i["stage"], i["mb"]) == (item.kind.value, item.stage, item.mb)
                assert i["chunk"] == s.stages_of_rank[r].index(item.stage)


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


def test_reading_a_buffer_nothing_provides_is_named():
    plan = build_plan(lowered("1f1b", {"P": 2, "M": 2}))
    for i in plan["programs"][1]:
        if i["op"] == "group":
            i["ops"] = [o for o in i["ops"] if o["ir"] != "1RECV_F1"]
    with pytest.raises(PlanError, match=r"rank 1, instruction #\d+ \(1F1\) reads buffer a1.1"):
        check_plan(plan)


def test_rejects_unlowered_schedules_and_foreign_json(tmp_path):
    with pytest.raises(PlanError, match="lower it first"):
        build_plan(ppir.load_schedule("1f1b", {"P": 2, "M": 2}))
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"format": "ppir.program/1"}))
    with pytest.raises(PlanError, match="not a ppir.plan/1 plan"):
        load_plan(path)


def test_compile_writes_the_plan_and_prints_how_to_launch(cli, tmp_path):
    out = tmp_path / "plan.json"
    code, stdout, _ = cli(
        "compile", "1f1b", "-D", "P=2", "-D", "M=4", "--backend", "cuda", "-o", str(out)
    )
    assert code == 0
    assert "torchrun --nproc-per-node 2 -m ppir.run" in stdout and str(out) in stdout
    assert load_plan(out)["ranks"] == 2


def test_plans_are_built_without_torch(tmp_path):
    code = f"""
import sys
from ppir.cli import main
assert main(["compile", "1f1b", "-D", "P=2", "--backend", "cuda", "-o", r"{tmp_path}/p.json"]) == 0
assert "torch" not in sys.modules, "writing a plan imported torch"
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def test_launch_help_lists_examples(capsys):
    from ppir.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["launch", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    assert "ppir launch -n 4 1f1b -D M=8 --model examples/gpt_model.py" in out
    assert "--verify-grads" in out and "--dist-backend" in out


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
        "--model",
        "examples/gpt_model.py",
    )
    assert code == 2 and "-n 3: the schedule has 2 ranks" in err
