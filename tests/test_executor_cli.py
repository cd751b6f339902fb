"""``ppir launch`` end to end (multi-process gloo): compile, verify, run, --verify-grads; data
parallel; two "nodes" on localhost."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GPT = str(ROOT / "examples" / "gpt_model.py")
SMALL = [
    "--module-opt",
    "layers=2",
    "--module-opt",
    "d_model=32",
    "--module-opt",
    "seq=8",
    "--module-opt",
    "batch=8",
]


def ppir_launch(*argv: str, wait: bool = True):
    cmd = [sys.executable, "-m", "ppir.cli", "launch", *argv]
    if not wait:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=ROOT)  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=150, cwd=ROOT)


def losses(out: str) -> list[float]:
    return [float(line.split()[3]) for line in out.splitlines() if line.startswith("step ")]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_launch_trains_and_verifies_gradients():
    res = ppir_launch(
        "-n", "2", "interleaved_vshape", "-D", "M=4", "-D", "v=2", "--module", GPT, *SMALL,
        "--steps", "4", "--verify-grads", "--device", "cpu",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "interleaved_vshape: 2 ranks, 4 stages, 4 microbatches" in out
    assert "verify-grads: largest |grad diff|" in out and ": OK" in out
    ls = losses(out)
    assert len(ls) == 4 and ls[-1] < ls[0], out
    assert "mean step time" in out


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_launch_data_parallel_verifies_against_the_global_batch():
    res = ppir_launch(
        "-n", "4", "--dp", "2", "zbv", "-D", "M=3", "--module", GPT, *SMALL[:-2],
        "--module-opt", "batch=12", "--steps", "2", "--verify-grads", "--device", "cpu",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "x 2 data-parallel replicas; 4 local processes" in res.stdout
    assert "verify-grads: largest |grad diff|" in res.stdout and ": OK" in res.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_nodes(node1: list[str], node0: list[str], timeout: float) -> tuple[list, list]:
    """Launch node 1 then node 0 (``--node-rank`` added), wait for both within ``timeout``
    seconds each, and kill what is left: (their exit codes, their (stdout, stderr)), node 1
    first."""
    nodes = [
        ppir_launch("--node-rank", "1", *node1, wait=False),
        ppir_launch("--node-rank", "0", *node0, wait=False),
    ]
    outs = []
    try:
        for p in nodes:
            outs.append(p.communicate(timeout=timeout))
    finally:
        for p in nodes:
            if p.poll() is None:
                p.kill()
    return [p.returncode for p in nodes], outs


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_two_nodes_on_localhost():
    """The same command on two "nodes" (static rendezvous at node 0's address): 2 x 2 ranks,
    PP=2 x DP=2, gradients checked against single-process training."""
    endpoint = f"127.0.0.1:{free_port()}"
    common = [
        "-n", "4", "--dp", "2", "--nnodes", "2", "--rdzv-endpoint", endpoint, "1f1b",
        "-D", "M=2", "--module", GPT, *SMALL, "--steps", "2", "--verify-grads", "--device", "cpu",
    ]  # fmt: skip
    codes, ((out1, err1), (out0, err0)) = two_nodes(common, common, timeout=150)
    assert codes == [0, 0], err0 + err1
    assert "2 local processes on node 0 of 2" in out0 and "on node 1 of 2" in out1
    assert "verify-grads: largest |grad diff|" in out0 and ": OK" in out0
    assert len(losses(out1)) == 2  # the last stage (pp rank 1) lives on node 1


NONDETERMINISTIC = """
import torch
def build_stage(stage, num_stages):
    return torch.nn.Linear(4, 4)          # no seed: the reference builds other weights
def make_batch(step):
    return torch.ones(4, 4), torch.zeros(4, 4)
def loss_fn(y, t):
    return ((y - t) ** 2).mean()
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_verify_grads_fails_above_tolerance(tmp_path):
    model = tmp_path / "nondet.py"
    model.write_text(NONDETERMINISTIC)
    res = ppir_launch(
        "-n", "2", "1f1b", "-D", "M=2", "--module", str(model), "--steps", "5", "--verify-grads",
        "--device", "cpu",
    )  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert "FAILED" in res.stdout and "largest difference at stage" in res.stdout
    # the summary, then each rank's worst parameter in rank order (each rank printed its own
    # line, which could come before the summary)
    lines = [x for x in res.stdout.splitlines() if x.startswith("verify-grads:")]
    assert lines[0].startswith("verify-grads: largest |grad diff| ") and lines[0].endswith("FAILED")
    assert [x.split(":")[1] for x in lines[1:]] == [" rank 0", " rank 1"], res.stdout
    assert not re.search(r"^step +\d", res.stdout, re.M)  # it stops at step 0, not after 5
    assert re.search(
        r"failed: rank \d: --verify-grads: step 0's gradients or loss differ from single-process "
        r"training by [0-9.e+-]+, above --tolerance 1e-05",
        res.stderr,
    )


NOISY_OPTIMIZER = """
import torch
def build_stage(stage, num_stages):
    torch.manual_seed(stage)
    return torch.nn.Linear(4, 4)
def make_batch(step):
    return torch.ones(4, 4), torch.zeros(4, 4)
def loss_fn(y, t):
    return ((y - t) ** 2).mean()
class Noisy(torch.optim.SGD):          # its steps differ between the pipeline and the reference
    def step(self, closure=None):
        super().step(closure)
        with torch.no_grad():
            for g in self.param_groups:
                for p in g["params"]:
                    p.add_(1e-3 * torch.randn_like(p))
def make_optimizer(params):
    return Noisy(params, lr=0.1)
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_verify_steps_failure_names_the_parameters_and_the_tolerance(tmp_path):
    model = tmp_path / "noisy.py"
    model.write_text(NOISY_OPTIMIZER)
    res = ppir_launch(
        "-n", "2", "1f1b", "-D", "M=2", "--module", str(model), "--steps", "2", "--verify-grads",
        "--verify-steps", "2", "--device", "cpu",
    )  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert "verify-grads: largest |grad diff|" in res.stdout and ": OK" in res.stdout
    assert re.search(
        r"failed: rank \d: --verify-steps 2: parameters differ from single-process training by "
        r"[0-9.e+-]+ after 2 optimizer steps, above --tolerance 1e-05 .*looser --tolerance",
        res.stderr,
    ), res.stderr
    assert "ppir.run: " not in res.stdout  # no summary of a run that failed its check


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_unseeded_make_batch_is_stopped_at_step_0_naming_the_ranks():
    res = ppir_launch(
        "-n", "2", "1f1b", "-D", "M=2", "--module", str(ROOT / "tests" / "unseeded_model.py"),
        "--steps", "3", "--device", "cpu",
    )  # fmt: skip
    assert res.returncode == 2, res.stderr  # the model breaks the runtime's contract
    failed = [ln for ln in res.stderr.splitlines() if ln.startswith("ppir launch: failed: ")]
    assert len(failed) == 1, res.stderr
    assert "make_batch(0) gave rank 0 and rank 1 different batches" in failed[0], res.stderr
    assert "seed make_batch from step" in failed[0] and "Traceback" not in res.stderr
    assert "step    0" not in res.stdout  # stopped before training on mismatched pairs


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_lr_is_refused_for_a_model_that_makes_its_own_optimizer(tmp_path):
    model = tmp_path / "own_optimizer.py"
    model.write_text(NOISY_OPTIMIZER)
    res = ppir_launch(
        "-n", "2", "1f1b", "-D", "M=2", "--module", str(model), "--steps", "2", "--lr", "100",
        "--device", "cpu",
    )  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr  # a usage mistake, as profile's
    assert "--lr 100: the model module defines make_optimizer, which sets its own" in res.stderr
    assert "Traceback" not in res.stderr


FRESH_MODEL_PER_STAGE = """
import torch
from ppir.torch import split_layers
class Head(torch.nn.Module):
    def __init__(self, emb):
        super().__init__()
        self.emb = emb
    def forward(self, h):
        return h @ self.emb.weight.t()
def build_stage(stage, num_stages):   # a new model at every call: the tie is per call only
    torch.manual_seed(0)
    emb = torch.nn.Linear(4, 4)
    layers = [torch.nn.Linear(4, 4) for _ in range(2)]
    return split_layers(layers, num_stages, first=emb, last=Head(emb))[stage]
def make_batch(step):
    return torch.ones(4, 4), torch.zeros(4, 4)
def loss_fn(y, t):
    return ((y - t) ** 2).mean()
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_verify_grads_says_when_build_stage_unties_a_declared_tie(tmp_path):
    model = tmp_path / "fresh.py"
    model.write_text(FRESH_MODEL_PER_STAGE)
    res = ppir_launch(
        "-n", "2", "1f1b", "-D", "M=2", "--module", str(model), "--steps", "1", "--verify-grads",
        "--device", "cpu",
    )  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert "the stages declare a parameter shared by stages [0, 1], but build_stage" in res.stderr
    assert "FAILED" not in res.stdout


NAN_AT_STEP_1 = """
import torch
def build_stage(stage, num_stages):
    torch.manual_seed(stage)
    return torch.nn.Linear(4, 4)
def make_batch(step):   # seeded: the same batch on every rank, one NaN in it at step 1
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(step))
    if step == 1:
        x[0, 0] = float("nan")
    return x, x
def loss_fn(y, t):
    return ((y - t) ** 2).mean()
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_nan_in_a_seeded_batch_is_named_as_a_nan_loss_not_as_different_batches(tmp_path):
    model = tmp_path / "nan_batch.py"
    model.write_text(NAN_AT_STEP_1)
    res = ppir_launch(
        "-n", "2", "1f1b", "-D", "M=2", "--module", str(model), "--steps", "2", "--device", "cpu",
    )  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert "different batches" not in res.stderr, res.stderr
    assert "failed: rank 1: the loss is nan at step 1, microbatch 0 (stage 1)" in res.stderr


SLOW_REFERENCE = """
import time
import torch
BUILT = []
class Stage(torch.nn.Linear):
    def forward(self, x):
        if self.slow:   # the --verify-grads reference's copy: 1 s per forward
            time.sleep(1.0)
        return super().forward(x)
def build_stage(stage, num_stages):
    torch.manual_seed(stage)
    m = Stage(4, 4)
    m.slow = len(BUILT) >= num_stages   # built again, after the runtime's: the reference
    BUILT.append(m)
    return m
def make_batch(step):
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(step))
    return x, x
def loss_fn(y, t):
    return ((y - t) ** 2).mean()
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_verify_steps_1_says_one_optimizer_step(tmp_path):
    """Was 'verify-params: after 1 optimizer steps, ...'."""
    model = tmp_path / "one_step.py"
    model.write_text(SLOW_REFERENCE)
    res = ppir_launch(
        "-n", "1", "1f1b", "-D", "M=2", "--module", str(model), "--steps", "1",
        "--verify-grads", "--verify-steps", "1", "--device", "cpu",
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    (line,) = [ln for ln in res.stdout.splitlines() if ln.startswith("verify-params:")]
    assert line.startswith("verify-params: after 1 optimizer step, largest |param diff| "), line
    assert line.endswith(": OK"), line


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_step_times_leave_out_the_verify_grads_reference(tmp_path):
    """--verify-steps trains a single-process reference beside steps 0..N-1; its time (the
    whole model on every rank) was counted in those steps' printed times and the mean."""
    model = tmp_path / "slow_reference.py"
    model.write_text(SLOW_REFERENCE)
    res = ppir_launch(
        "-n", "1", "1f1b", "-D", "M=2", "--module", str(model), "--steps", "3",
        "--verify-grads", "--verify-steps", "2", "--device", "cpu",
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "verify-params: after 2 optimizer steps" in res.stdout and "FAILED" not in res.stdout
    times = {int(ln.split()[1]): float(ln.split()[4]) for ln in res.stdout.splitlines()
             if ln.startswith("step ")}  # fmt: skip
    assert sorted(times) == [0, 1, 2], res.stdout
    assert times[1] < 500, res.stdout  # the reference's forward slept 1 s in step 1
    mean = float(re.search(r"mean step time ([0-9.]+) ms", res.stdout).group(1))
    assert mean < 500, res.stdout


BATCH_NORM = """
import torch
def build_stage(stage, num_stages):
    torch.manual_seed(stage)
    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
def make_batch(step):
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(step))
    return x, x
def loss_fn(y, t):
    return ((y - t) ** 2).mean()
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "layer, why",
    [
        (  # statistics over a microbatch: it said only that pipelined training differs
            "torch.nn.BatchNorm1d(4)",
            "; the stages train BatchNorm, whose statistics over a microbatch are not those over "
            "the whole batch, so a difference is expected (docs/executor.md)",
        ),
        (  # a new user's MLP with Dropout(0.2) failed with no word of why
            "torch.nn.Dropout(0.2)",
            "; the stages hold dropout in training mode, whose random masks differ between the "
            "pipelined run and the reference: verify with dropout off (p=0)",
        ),
    ],
    ids=["batch-norm", "dropout"],
)
def test_verify_grads_says_why_a_model_differs_by_design(tmp_path, layer, why):
    model = tmp_path / "by_design.py"
    model.write_text(BATCH_NORM.replace("torch.nn.BatchNorm1d(4)", layer))
    res = ppir_launch(
        "-n", "2", "1f1b", "-D", "M=2", "--module", str(model), "--steps", "1", "--verify-grads",
        "--device", "cpu",
    )  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    [failed] = [ln for ln in res.stderr.splitlines() if ln.startswith("ppir launch: failed: ")]
    assert "--verify-grads: step 0's gradients or loss differ from single-process" in failed
    assert failed.endswith(why), failed


IGNORED_LABELS = """
import torch
import torch.nn.functional as F
def build_stage(stage, num_stages):
    torch.manual_seed(stage)
    return torch.nn.Linear(4, 4)
def make_batch(step):
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(step))
    labels = torch.tensor([1, -100, -100, -100, 2, 3, -100, 0])  # HF's convention: -100 = none
    return x, labels
def loss_fn(logits, labels):
    return F.cross_entropy(logits, labels, ignore_index=-100)  # a mean over the labelled rows
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_verify_grads_says_when_the_loss_is_no_mean_over_equal_samples(tmp_path):
    """A language model's labels with ignore_index=-100 (HF's convention): each microbatch's
    mean is over its own count of labelled tokens, so the pipeline weighs them otherwise than
    the whole batch does.  It failed with no word of why."""
    model = tmp_path / "ignored.py"
    model.write_text(IGNORED_LABELS)
    res = ppir_launch(
        "-n", "2", "1f1b", "-D", "M=2", "--module", str(model), "--steps", "1", "--verify-grads",
        "--device", "cpu",
    )  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    [failed] = [ln for ln in res.stderr.splitlines() if ln.startswith("ppir launch: failed: ")]
    assert "--verify-grads: step 0's gradients or loss differ from single-process" in failed
    assert re.search(
        r"; loss_fn is not a mean over equally weighted samples: on the reference's output the "
        r"whole batch's loss is [0-9.]+, the mean of its 2 microbatches' losses [0-9.]+, ",
        failed,
    ), failed
    assert failed.endswith("reduction='sum') / target.numel() (docs/executor.md)"), failed


@pytest.mark.timeout(60)
def test_a_rank_started_by_hand_is_a_usage_error_saying_how_to_start_it(tmp_path):
    """``python -m ppir.run`` without torchrun's environment exited 1, as if a rank had failed;
    it is a usage error (exit 2), and the one line says how to start it."""
    pytest.importorskip("torch")
    import os

    import ppir
    from ppir.plan import build_plan, save_plan

    save_plan(build_plan(ppir.compile(ppir.load("1f1b", P=2, M=4)).program), tmp_path / "p.json")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR",
                                                             "MASTER_PORT")}  # fmt: skip
    res = subprocess.run(
        [sys.executable, "-m", "ppir.run", str(tmp_path / "p.json"), "--module", GPT],
        capture_output=True, text=True, timeout=50, cwd=ROOT, env=env,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert res.stderr == (
        "ppir.run: error: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set: start the ranks "
        "through 'ppir launch' or torchrun ('torchrun --nproc-per-node N -m ppir.run PLAN "
        "--module MODULE')\n"
    )


@pytest.mark.timeout(60)
def test_a_rank_that_starts_after_its_launcher_ended_leaves_without_a_word(tmp_path):
    """Ctrl-C while the ranks started Python: a rank that reached the plan after 'ppir launch'
    had removed its temporary folder printed 'ppir.run: error: .../plan.json: cannot read the
    plan' under the launcher's last line (seen once, with other work on the machine)."""
    pytest.importorskip("torch")
    import os

    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": "1", "PPIR_LAUNCHER": "1"}  # fmt: skip
    gone = tmp_path / "ppir-plan-gone" / "plan.json"
    res = subprocess.run(
        [sys.executable, "-m", "ppir.run", str(gone), "--module", GPT],
        capture_output=True, text=True, timeout=50, cwd=ROOT, env=env,
    )  # fmt: skip
    assert res.returncode == 143 and res.stderr == "", res.stderr
    env.pop("PPIR_LAUNCHER")  # not under ppir launch: the path is the user's mistake
    res = subprocess.run(
        [sys.executable, "-m", "ppir.run", str(gone), "--module", GPT],
        capture_output=True, text=True, timeout=50, cwd=ROOT, env=env,
    )  # fmt: skip
    assert res.returncode == 2 and "cannot read the plan" in res.stderr, res.stderr


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_model_without_the_contract_functions_exits_2_as_profile_does(tmp_path):
    """A model module that lacks build_stage, make_batch and loss_fn is the user's mistake:
    'ppir launch' ended with exit code 1 (a failure) where 'ppir profile' says exit 2.  The
    module binds a name through globals(), which its source does not show, so the launcher
    leaves it to the ranks (tests/test_cli.py has the launcher's own refusal)."""
    model = tmp_path / "no_api.py"
    model.write_text("def helper():\n    return 1\n\n\nglobals()['other'] = helper\n")
    res = ppir_launch("-n", "2", "1f1b", "-D", "M=2", "--module", str(model), "--device", "cpu")
    assert res.returncode == 2, res.stdout + res.stderr
    first = res.stderr.splitlines()[0]
    assert first.startswith("ppir launch: failed: rank ") and "lacks build_stage" in first, first
    assert "Traceback" not in res.stderr


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_two_nodes_with_other_steps_stop_at_once_naming_the_option():
    """Node 1 started with another --steps: the plans agree, so the nodes trained together
    until node 0's last step and then failed after --timeout ("no answer from its peers ...
    is it stuck?"); now every rank compares its options before the model is loaded."""
    endpoint = f"127.0.0.1:{free_port()}"
    common = [
        "-n", "2", "--nnodes", "2", "--rdzv-endpoint", endpoint, "1f1b", "-D", "M=2",
        "--module", GPT, *SMALL, "--device", "cpu", "--timeout", "20",
    ]  # fmt: skip
    codes, ((out1, err1), (out0, err0)) = two_nodes(
        [*common, "--steps", "6"], [*common, "--steps", "3"], timeout=100
    )
    assert codes == [1, 1], err0 + err1
    for err in (err0, err1):
        assert "the ranks were started with different options: --steps differs" in err, err
        assert "Traceback" not in err, err
    assert losses(out1) == []  # nothing trained


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_rank_stuck_on_node_1_ends_when_node_0_fails():
    """Rank 1 (node 1) sleeps in its forward; rank 0 (node 0) times out and its launcher
    ends, taking the rendezvous store with it.  Node 1 used to wait for ever: its rank's
    watchdog found no failure record in a store it could no longer reach, and node 1's
    launcher stops its ranks only when one of them ends.  Now the lost store ends the rank,
    and node 1 says where it was."""
    endpoint = f"127.0.0.1:{free_port()}"
    faulty = str(ROOT / "tests" / "faulty_model.py")
    common = [
        "-n", "2", "--nnodes", "2", "--rdzv-endpoint", endpoint, "1f1b", "-D", "M=4",
        "--module", faulty, "--module-opt", "mode=hang", "--device", "cpu", "--timeout", "4",
        "--steps", "3",
    ]  # fmt: skip
    codes, ((_, err1), (_, err0)) = two_nodes(common, common, timeout=60)
    assert codes == [1, 1], err0 + err1
    assert "no answer from rank 1 within the 4 s timeout" in err0, err0
    # whichever node 1's watchdog saw first: rank 0's failure (still in the store), or the
    # store gone with node 0's launcher; either way node 1 ends and says where rank 1 was
    assert (
        "ppir launch: failed: rank 1: lost the rendezvous store" in err1
        or "(reported to rank 1)" in err1
    ), err1
    assert "rank 1 was here when it stopped (most recent call last):" in err1, err1
    assert re.search(r'faulty_model\.py", line \d+,? in forward', err1), err1
