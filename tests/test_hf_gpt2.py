"""HF transformers GPT-2 (built from a config, random weights, no download) through ppir:
cut into stages by ``ppir.torch.split_layers``, trained with ``ppir launch``; its tied
token-embedding and LM-head weights stay identical (summed gradients), or the run is refused
naming the parameter -- never silently untied.  Needs the ``hf`` extra (transformers)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parent.parent
MODEL = str(ROOT / "examples" / "hf_gpt2.py")
SMALL = ["--module-opt", "layers=3", "--module-opt", "d_model=16", "--module-opt", "heads=2"]


def hf():
    from ppir.torch.model import load_model

    return load_model(MODEL)


def test_stages_compute_what_the_library_model_computes():
    m = hf()
    stages = m.stages(3)
    assert [len(s.layers) for s in stages] == [2, 1, 1]
    assert [e["holders"] for e in stages[0].ppir_shared] == [
        [[0, "first.wte.weight"], [2, "last.lm_head.weight"]]
    ]
    assert stages[0].ppir_shared[0]["name"] == "transformer.wte.weight = lm_head.weight"
    ids, _ = m.make_batch(0)
    x = ids
    for s in stages:
        x = s(x)
    assert (x - m.build_model()(ids).logits).abs().max().item() == 0.0


def launch(*argv: str, model: str = MODEL) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ppir.cli", "launch", "-n", "2", *argv, "--module", model,
         *SMALL, "--device", "cpu"],
        capture_output=True, text=True, timeout=150, cwd=ROOT,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("schedule", ["1f1b", "zbv"])
def test_tied_weights_stay_identical_after_three_optimizer_steps(schedule):
    res = launch(schedule, "-D", "M=4", "--steps", "3", "--verify-grads", "--verify-steps", "3",
                 "--lr", "0.1")  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "verify-grads: largest |grad diff|" in res.stdout and ": OK" in res.stdout
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("verify-params")]
    assert lines, res.stdout + res.stderr
    line = lines[0]
    assert "tied copies differ by at most 0.000e+00: OK" in line, line
    assert "tied 'transformer.wte.weight = lm_head.weight' on stages [0, " in line, line
    # the summary gives the largest peak of any rank, the one compile predicts (1F1B: rank 0)
    import ppir

    worst = ppir.compile(ppir.load(schedule, P=2, M=4)).memory.worst
    assert worst.peak_activations.denominator == 1  # printed as a whole number of A
    peak = str(worst.peak_activations)
    assert f"peak in-flight activations {peak} A on rank {worst.rank} (" in res.stdout, res.stdout


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_tied_weights_can_be_refused_by_name():
    res = launch("1f1b", "-D", "M=2", "--steps", "1", "--tied", "refuse")
    assert res.returncode == 1, res.stdout + res.stderr
    assert re.search(
        r"failed: rank \d: parameter 'transformer.wte.weight = lm_head.weight' is shared",
        res.stderr,
    )


UNDECLARED = """
import sys
sys.path.insert(0, {examples!r})
from hf_gpt2 import *          # noqa: F403
import hf_gpt2


def build_stage(stage, num_stages):
    st = hf_gpt2.stages(num_stages)[stage]
    st.ppir_shared = []        # hide the tie, as a hand-written split would
    return st
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_an_undeclared_tie_is_refused_by_verify_grads(tmp_path):
    model = tmp_path / "untied.py"
    model.write_text(UNDECLARED.format(examples=str(ROOT / "examples")))
    res = launch("1f1b", "-D", "M=2", "--steps", "1", "--verify-grads", model=str(model))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "is one tensor in 'first.wte.weight' of stage 0, 'last.lm_head.weight' of stage 1" in (
        res.stderr
    )
    assert "so the copies on ranks 0 and 1 would train apart" in res.stderr
