"""Fault injection (multi-process gloo): every failure ends every process within the timeout,
names the right rank and cause, and exits non-zero; no process is left behind.

Each row is one ``ppir launch -n 2 1f1b -D M=4`` (two ranks under torch's elastic agent) with
:mod:`faulty_model`, run by :mod:`fault_harness`, which injects the fault (a signal to a rank
or to the launcher), is the subreaper of everything the launch starts, and reports any process
still alive 10 s after the launcher ended.  The table in docs/executor.md lists these rows.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def run(tmp_path, mode="none", *extra, action="none", rank=0, sig=9, steps=3, deadline=60):
    piddir = tmp_path / "pids"
    piddir.mkdir()
    cmd = [
        sys.executable, "-m", "ppir.cli", "launch", "-n", "2", "1f1b", "-D", "M=4",
        "--module", str(HERE / "faulty_model.py"), "--module-opt", f"mode={mode}",
        "--module-opt", f"piddir={piddir}", "--steps", str(steps), "--device", "cpu", *extra,
    ]  # fmt: skip
    spec = {
        "cmd": cmd,
        "out": str(tmp_path / "report.json"),
        "action": action,
        "rank": rank,
        "signal": sig,
        "ranks": 2,
        "piddir": str(piddir),
        "deadline": deadline,
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    subprocess.run(
        [sys.executable, str(HERE / "fault_harness.py"), str(tmp_path / "spec.json")],
        cwd=ROOT,
        timeout=deadline + 30,
        check=True,
    )
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["orphans"] == [], rep
    return rep


def failure_line(rep) -> str:
    lines = [ln for ln in rep["stderr"].splitlines() if ln.startswith("ppir launch: failed: ")]
    assert len(lines) == 1, rep["stderr"]
    return lines[0][len("ppir launch: failed: ") :]


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_rank_raising_names_it_with_its_traceback_once(tmp_path):
    rep = run(tmp_path, "raise")
    assert rep["returncode"] == 1 and rep["elapsed"] < 40, rep
    assert failure_line(rep) == "rank 1: ValueError: boom in stage 1"
    err = rep["stderr"]
    assert err.count("Traceback (most recent call last)") == 1, err
    assert 'raise ValueError("boom in stage 1")' in err and "faulty_model.py" in err
    # the ranks leave the report to the launcher: the cause once, no rank's own lines
    assert err.count("boom in stage 1") == 3, err  # the failure line; the traceback: 2
    assert "ppir.run:" not in err and "stopping" not in err, err
    assert "step    0  loss" in rep["stdout"] and "step    1" not in rep["stdout"]


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_shape_mismatch_names_rank_op_and_shapes(tmp_path):
    rep = run(tmp_path, "shape")
    assert rep["returncode"] == 2, rep  # a model that breaks the plan's shapes: its mistake
    assert failure_line(rep) == (
        "rank 0: rank 0, instruction #0 (0F0): the output of stage 0 has shape (2, 5) float32 "
        "but the plan's metadata for boundary 1 says (2, 4) float32 (at step 1: a boundary's "
        "shapes are fixed for the whole run, the plan's or those the first step inferred)"
    ).replace("rank 0: rank 0,", "rank 0,")
    assert "Traceback" not in rep["stderr"]


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_stuck_rank_is_named_by_its_peer_after_the_timeout(tmp_path):
    rep = run(tmp_path, "hang", "--timeout", "4")
    assert rep["returncode"] == 1 and rep["elapsed"] < 40, rep
    line = failure_line(rep)
    assert (
        line.startswith("rank 0, instruction #")
        and "no answer from rank 1 within the 4 s timeout" in line
    )
    # where the stuck rank was: its stack, ending in the model's sleep (it said nothing)
    err = rep["stderr"]
    assert "rank 1 was here when it stopped (most recent call last):" in err, err
    assert re.search(r'faulty_model\.py", line \d+,? in forward', err), err


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_rank_stuck_before_its_step_is_a_comm_error_without_traceback(tmp_path):
    """Rank 0 hangs in make_batch(1) while rank 1 compares the batches of steps 0-2: rank 1's
    wait was torch's RuntimeError with its traceback, reported as rank 1's own failure."""
    rep = run(tmp_path, "hang_batch", "--timeout", "4")
    assert rep["returncode"] == 1 and rep["elapsed"] < 40, rep
    assert failure_line(rep).startswith(
        "rank 1: comparing make_batch(1) across the ranks: no answer from its peers within the "
        "4 s timeout (is it stuck?)"
    ), rep["stderr"]
    assert "Traceback" not in rep["stderr"], rep["stderr"]


@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.parametrize("rank", [1, 0])
def test_sigkill_of_a_rank_names_it_and_its_signal(tmp_path, rank):
    rep = run(tmp_path, "slow", action="kill_rank", rank=rank, steps=1000)
    assert rep["returncode"] == 1 and rep["elapsed"] < 40, rep
    assert failure_line(rep) == (
        f"rank {rank} died without a Python exception (killed by signal 9 (SIGKILL))"
    )
    assert "Exception raised from" not in rep["stderr"]  # no C++ stack from the survivor


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_rank_exiting_without_an_exception_is_named_by_its_code(tmp_path):
    rep = run(tmp_path, "exit")
    assert rep["returncode"] == 1, rep
    assert failure_line(rep) == "rank 1 died without a Python exception (exit code 3)"


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_rank_leaving_with_exit_code_0_mid_run_is_named(tmp_path):
    """torch's agent lists only the ranks that ended non-zero: the report named rank 0, which
    lost its peer, and not rank 1, which had left."""
    rep = run(tmp_path, "leave", "--timeout", "10")
    assert rep["returncode"] == 1 and rep["elapsed"] < 40, rep
    line = failure_line(rep)
    assert line.startswith(
        "rank 1 ended with exit code 0 while rank 0 was still running; rank 0"
    ), rep["stderr"]
    assert "rank 0: lost its peers (exit code 1); rank 1: left early (exit code 0)" in rep["stderr"]


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_sigkill_of_the_launcher_takes_its_ranks_with_it(tmp_path):
    rep = run(tmp_path, "slow", action="kill_launcher", sig=9, steps=1000)
    assert rep["returncode"] == -9, rep
    assert rep["cleanup"] - rep["elapsed"] < 5, rep  # the ranks died with it, none orphaned


@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.parametrize("sig,name", [(15, "SIGTERM"), (2, "SIGINT")])
def test_sigterm_of_the_launcher_stops_every_rank(tmp_path, sig, name):
    rep = run(tmp_path, "slow", action="term_launcher", sig=sig, steps=1000)
    assert rep["returncode"] == 128 + sig and rep["elapsed"] < 40, rep
    err = rep["stderr"]
    sent = (
        "SIGTERM"  # SIGINT too: a rank still importing ppir printed KeyboardInterrupt's traceback
    )
    assert f"ppir launch: stopped by {name}: every rank was sent {sent}" in err
    # neither a rank's traceback nor the elastic agent's log line ("Received 2 death signal")
    assert "Traceback" not in err and "ppir.run:" not in err and "death signal" not in err, err


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_ctrl_c_while_the_ranks_import_torch_stops_them_without_tracebacks(tmp_path):
    rep = run(tmp_path, "slow", action="int_importing", steps=1000)
    assert rep["returncode"] == 130 and rep["elapsed"] < 40, rep
    err = rep["stderr"]
    assert "ppir launch: stopped by SIGINT: every rank was sent SIGTERM" in err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "ppir.run:" not in err and "death signal" not in err, err


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_ctrl_c_while_the_launcher_imports_torch_is_one_line(tmp_path):
    """Ctrl-C pressed again and again from the launcher's own import of torch: a
    KeyboardInterrupt landing in Python code torch's C++ calls aborted the launcher ('terminate
    called after throwing an instance of pybind11::error_already_set', -6), or it said 'ppir:
    interrupted' and then died by SIGINT (-2) or with a traceback of the next one."""
    rep = run(tmp_path, "slow", action="int_launcher_torch", steps=1000)
    assert rep["returncode"] == 130 and rep["stderr"] == "ppir: interrupted\n", rep


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_ctrl_c_while_the_ranks_start_python_stops_them_without_tracebacks(tmp_path):
    """Forwarded as SIGINT, it reached ranks still importing ppir (before their own handler):
    each printed a KeyboardInterrupt traceback."""
    rep = run(tmp_path, "slow", action="int_ranks_started", steps=1000)
    assert rep["returncode"] == 130 and rep["elapsed"] < 40, rep
    err = rep["stderr"]
    assert err.splitlines()[-1] == "ppir launch: stopped by SIGINT: every rank was sent SIGTERM"
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_nan_loss_stops_naming_rank_step_and_microbatch(tmp_path):
    rep = run(tmp_path, "nanloss")
    assert rep["returncode"] == 1, rep
    assert failure_line(rep).startswith(
        "rank 1: the loss is nan at step 1, microbatch 2 (stage 1); stopping"
    )


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_nan_loss_can_warn_and_go_on(tmp_path):
    rep = run(tmp_path, "nanloss", "--on-nonfinite", "warn")
    assert rep["returncode"] == 0, rep
    assert "ppir: warning: rank 1: the loss is nan at step 1, microbatch 2" in rep["stderr"]


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", ["0", "-5"])
def test_bad_timeout_is_refused_before_anything_starts(tmp_path, value):
    rep = run(tmp_path, "none", "--timeout", value)
    assert rep["returncode"] == 2 and rep["elapsed"] < 20, rep
    assert "--timeout: must be a positive number of seconds" in rep["stderr"]
    assert "Traceback" not in rep["stderr"]


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_tampered_plan_is_refused_by_every_rank_before_anything_is_posted(tmp_path):
    """A hand-edited plan run with the launcher's own rank command (as torchrun would)."""
    from ppir.backends.cuda.launch import start

    import ppir
    from ppir.plan import build_plan, plan_digest, save_plan

    plan = build_plan(ppir.compile(ppir.load("1f1b", P=2, M=4)).program)  # what launch runs
    send = next(i for i in plan["programs"][0] if i["ir"] == "post[0SEND_F0]")
    send["ops"][0]["buffer"] = "a1.1"  # crossed buffers: wrong gradients if it ran
    plan["digest"] = plan_digest(plan)
    save_plan(plan, tmp_path / "plan.json")
    out = start(
        ("-u", "-m", "ppir.run", str(tmp_path / "plan.json"), "--module",
         str(HERE / "faulty_model.py"), "--device", "cpu"),
        2,
    )  # fmt: skip
    assert not out.ok and out.cause is not None
    assert "'buffer' is 'a1.1', but the IR item gives 'a1.0'" in out.cause.message
    assert out.cause.message.startswith(
        f"{tmp_path / 'plan.json'}: programs[0][1] (post[0SEND_F0])"
    )


def test_a_broadcasting_rank_does_not_blame_itself(monkeypatch):
    """The rank sending the boundary shapes that loses a peer names the others, not itself
    (it said 'lost the connection to rank 0' on rank 0)."""
    from ppir.torch import shapes
    from ppir.torch.errors import CommError

    def broken(*a, **k):
        raise RuntimeError("[../gloo/pair.cc:537] Read error [127.0.0.1]: Connection reset")

    monkeypatch.setattr(shapes.dist, "broadcast", broken)
    monkeypatch.setattr(shapes.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(shapes.dist, "get_world_size", lambda: 3)
    with pytest.raises(CommError) as sender:
        shapes.broadcast_spec({"x": 1}, 0, None, "cpu", rank=0)
    assert "lost the connection to ranks 1 and 2 (did it fail?)" in str(sender.value)
    assert "pair.cc" not in str(sender.value)
    with pytest.raises(CommError) as receiver:
        shapes.broadcast_spec(None, 0, None, "cpu", rank=2)
    assert "rank 2: exchanging boundary shapes: lost the connection to rank 0" in str(
        receiver.value
    )
