"""HF transformers Llama (built from a config, random weights, no download) through ppir: its
layers take rotary position embeddings beside the hidden states, which ``examples/hf_llama.py``
computes in each stage; grouped-query attention, RMSNorm and SwiGLU; a tied or untied head.
Needs the ``hf`` extra (transformers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parent.parent
MODEL = str(ROOT / "examples" / "hf_llama.py")


def hf():
    from ppir.torch.model import load_model

    return load_model(MODEL)


def run(stages, ids):
    x = ids
    for s in stages:
        x = s(x)
    return x


def test_stages_compute_what_the_library_model_computes():
    m = hf()
    stages = m.stages(3)
    assert [len(s.layers) for s in stages] == [2, 1, 1]
    assert [e["holders"] for e in stages[0].ppir_shared] == [
        [[0, "first.weight"], [2, "last.lm_head.weight"]]
    ]
    assert stages[0].ppir_shared[0]["name"] == "model.embed_tokens.weight = lm_head.weight"
    model = m.build_model()
    attn = model.model.layers[0].self_attn
    assert model.config.num_key_value_heads < model.config.num_attention_heads  # GQA
    assert attn.k_proj.out_features < attn.q_proj.out_features
    ids, _ = m.make_batch(0)
    with torch.no_grad():
        x = run(stages, ids)
        assert (x - model(ids).logits).abs().max().item() == 0.0
        # causal: a changed last token changes no earlier position's logits
        later = ids.clone()
        later[:, -1] = (later[:, -1] + 1) % m.CONFIG["vocab"]
        y = run(stages, later)
    assert torch.equal(y[:, :-1], x[:, :-1]) and not torch.equal(y[:, -1], x[:, -1])


def test_memory_model_counts_what_a_layer_keeps():
    """ppir's per-layer bytes against what autograd saves for one decoder layer, counted as
    ``ppir profile`` counts them: HF writes RMSNorm and SwiGLU as elementwise ops, so each norm
    keeps its input and its normalised input (``norm_tensors=2`` in fp32) and the MLP the gate,
    its SiLU and the up projection (``act_tensors=3``); left out, 0.8 % here: each norm's
    per-token rsqrt and the rotary cos and sin the layer multiplies Q and K by."""
    from ppir.analysis.models import make_model
    from ppir.profile.measure import SavedBytes

    m = hf()
    h, heads, kv, f, seq, b = 128, 4, 2, 256, 64, 4
    defaults = dict(m.CONFIG)
    m.configure(d_model=h, heads=heads, kv_heads=kv, ffn=f, seq=seq, layers=1)
    try:
        model = m.build_model()
    finally:
        m.configure(**defaults)
    block = m.Block(model.model.layers[0], model.model.rotary_emb)
    saved = SavedBytes(block.parameters())
    with torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
        block(torch.randn(b, seq, h, requires_grad=True))
    shape = make_model(
        layers=1, hidden=h, heads=heads, kv_heads=kv, ffn=f, seq=seq, mbs=b, dtype="fp32",
        swiglu=1, norm="rmsnorm", dropout=0, act_tensors=3, norm_tensors=2,
    )  # fmt: skip
    assert abs(saved.total - shape.activation_bytes_per_layer()) / saved.total < 0.01


def test_an_untied_head_is_no_shared_parameter():
    m = hf()
    m.configure(tie=0)
    try:
        assert all(not s.ppir_shared for s in m.stages(2))
    finally:
        m.configure(tie=1)


def launch(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ppir.cli", "launch", "-n", "2", *argv, "--module", MODEL,
         "--module-opt", "layers=4", "--device", "cpu"],
        capture_output=True, text=True, timeout=150, cwd=ROOT,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "schedule, tie",
    [(["1f1b"], 1), (["interleaved_1f1b", "-D", "v=2"], 0), (["zbv"], 1)],
    ids=["1f1b", "interleaved-untied", "zbv"],
)
def test_pipelined_training_is_single_process_training(schedule, tie):
    res = launch(*schedule, "-D", "M=4", "--steps", "3", "--verify-grads", "--verify-steps", "3",
                 "--module-opt", f"tie={tie}", "--lr", "0.1")  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "verify-grads: largest |grad diff|" in res.stdout and ": OK" in res.stdout
    [line] = [ln for ln in res.stdout.splitlines() if ln.startswith("verify-params")]
    assert ": OK" in line, line
    if tie:
        assert "tied copies differ by at most 0.000e+00: OK" in line, line
        assert "tied 'model.embed_tokens.weight = lm_head.weight' on stages [0, " in line, line
    else:
        assert "tied" not in line, line
