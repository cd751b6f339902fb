"""The embeddable runtime as users call it: examples/embed_runtime.py (their own loop,
optimizer, data and device mesh; PP=2 x DP=2 under torch's launcher) trains; the public names
of ``ppir.torch`` import lazily."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ppir_torch_imports_nothing_until_used():
    code = """
import sys
import ppir, ppir.torch, ppir.plan
assert "torch" not in sys.modules, "importing ppir.torch imported torch"
assert "PipelineRuntime" in dir(ppir.torch)
try:
    ppir.torch.NoSuchThing
except AttributeError as e:
    assert "NoSuchThing" in str(e)
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_embedded_runtime_example_trains_pipeline_x_data_parallel(tmp_path, capfd):
    pytest.importorskip("torch")
    from ppir.backends.cuda.launch import start

    res = start((str(ROOT / "examples" / "embed_runtime.py"), "--steps", "30"), 4)
    assert res.ok, res.cause
    out = capfd.readouterr().out
    losses = [float(ln.split()[3]) for ln in out.splitlines() if ln.startswith("step ")]
    assert len(losses) == 6 and losses[-1] < losses[0] / 2, out
    evals = [float(ln.split()[-1]) for ln in out.splitlines() if ln.startswith("eval ")]
    assert len(evals) == 3 and evals[-1] < evals[0], out  # the held-out loss falls too
