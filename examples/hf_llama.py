"""HF transformers Llama, built from a config with random weights (no download), as pipeline
stages: the model module of ``ppir launch --module`` for a model whose layers take more than the
hidden states (rotary position embeddings, grouped-query attention, RMSNorm, SwiGLU).

A ``LlamaDecoderLayer`` is called as ``layer(h, position_embeddings=(cos, sin), ...)``: the
model computes the rotary embeddings once and hands them to every layer.  Here each layer is
wrapped in a :class:`Block` that computes them from its input's sequence length (cheap: a few
elementwise ops on ``[1, seq, head_dim]``), so only the hidden states cross a stage boundary, one
message of ``[mb, seq, d_model]``.  Handing ``cos``, ``sin`` and the position ids on in a dict
boundary also runs (``call=`` of ``split_layers``), but every floating-point leaf of a boundary
is differentiable to ppir's runtime: ``cos`` and ``sin`` would each travel back as a gradient of
zeros and the next stage would keep tensors for their gradient (docs/executor.md).  No
attention mask is passed: with ``attn_implementation="sdpa"`` a missing mask is a causal one
(``LlamaModel`` itself passes none there when nothing is padded).

The whole ``LlamaForCausalLM`` is built once per process (seeded, so identical everywhere) and
cut with :func:`ppir.torch.split_layers`: stage 0 runs the token embedding, the last stage the
final RMSNorm and the LM head.  ``tie=1`` (the default, as Llama 3.2 1B) ties the head to the
embedding: ``split_layers`` finds the shared parameter and the runtime sums its gradient across
the ranks holding a copy; ``tie=0`` is the untied head of the larger Llamas.

    ppir launch -n 2 1f1b -D M=4 --module examples/hf_llama.py --steps 20
    ppir launch -n 2 zbv -D M=4 --module examples/hf_llama.py --verify-grads --verify-steps 3
    ppir profile --module examples/hf_llama.py --ranks 2 --stages 4 -o llama.toml

Options (``--module-opt KEY=VALUE``): vocab, d_model, heads, kv_heads (< heads: grouped-query
attention), ffn (the SwiGLU width), layers, seq, batch, seed, tie.  Needs ``pip install
'ppir[torch,hf]'`` (transformers; written against 5.25, whose ``LlamaModel`` holds the
``rotary_emb`` its layers take ``position_embeddings`` from).  Plain SGD (``--lr``) is the
optimizer.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIG = {
    "vocab": 96,
    "d_model": 32,
    "heads": 4,
    "kv_heads": 2,
    "ffn": 64,
    "layers": 4,
    "seq": 16,
    "batch": 8,
    "seed": 0,
    "tie": 1,
}
_STAGES: dict = {}


def configure(**options) -> None:
    unknown = set(options) - set(CONFIG)
    if unknown:
        raise ValueError(f"unknown hf_llama options {sorted(unknown)}; known: {sorted(CONFIG)}")
    CONFIG.update(options)
    _STAGES.clear()


class Block(nn.Module):
    """One decoder layer, given the rotary embeddings of positions 0..seq-1 (the model's own
    rotary module, shared by every block: buffers only, no parameters)."""

    def __init__(self, layer, rotary):
        super().__init__()
        self.layer, self.rotary = layer, rotary

    def forward(self, h):
        pos = torch.arange(h.shape[1], device=h.device).unsqueeze(0)
        out = self.layer(h, position_embeddings=self.rotary(h, pos), position_ids=pos)
        return out[0] if isinstance(out, tuple) else out  # transformers < 4.54: (hidden,)


class Head(nn.Module):
    """Llama's output side: final RMSNorm, LM head (tied to the embedding with ``tie=1``)."""

    def __init__(self, model):
        super().__init__()
        self.norm, self.lm_head = model.model.norm, model.lm_head

    def forward(self, h):
        return self.lm_head(self.norm(h))


def build_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    c = CONFIG
    config = LlamaConfig(
        vocab_size=c["vocab"],
        hidden_size=c["d_model"],
        intermediate_size=c["ffn"],
        num_hidden_layers=c["layers"],
        num_attention_heads=c["heads"],
        num_key_value_heads=c["kv_heads"],
        max_position_embeddings=c["seq"],
        tie_word_embeddings=bool(c["tie"]),
        attention_dropout=0.0,
        attn_implementation="sdpa",
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(c["seed"])
    return LlamaForCausalLM(config)


def stages(num_stages: int) -> list:
    if num_stages not in _STAGES:
        from ppir.torch import split_layers

        model = build_model()
        rotary = getattr(model.model, "rotary_emb", None)
        if rotary is None:  # an older transformers: its layers make their own embeddings
            import transformers

            raise ImportError(
                f"examples/hf_llama.py needs a transformers whose LlamaModel holds the rotary "
                f"embedding its layers take (model.model.rotary_emb; written against 5.25), "
                f"not {transformers.__version__}: pip install -U 'transformers>=4.48'"
            )
        _STAGES[num_stages] = split_layers(
            [Block(layer, rotary) for layer in model.model.layers],
            num_stages,
            first=model.model.embed_tokens,
            last=Head(model),
            model=model,
        )
    return _STAGES[num_stages]


def build_stage(stage: int, num_stages: int) -> nn.Module:
    return stages(num_stages)[stage]


def make_batch(step: int):
    """(tokens, next tokens), [batch, seq]: sequences counting up with a per-row stride."""
    c = CONFIG
    g = torch.Generator().manual_seed(10_000 + step)
    start = torch.randint(0, c["vocab"], (c["batch"], 1), generator=g)
    stride = torch.randint(1, 4, (c["batch"], 1), generator=g)
    seq = (start + stride * torch.arange(c["seq"] + 1)) % c["vocab"]
    return seq[:, :-1], seq[:, 1:]


def loss_fn(logits, targets):
    """The mean over every token of the microbatch (no ignored labels: a mean over a count that
    varies per microbatch would weigh tokens otherwise than the whole batch; docs/executor.md)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
