"""HF transformers GPT-2, built from a config with random weights (no download), as pipeline
stages: the model module of ``ppir launch --module`` for a real library model.

The whole ``GPT2LMHeadModel`` is built once per process (seeded, so identical everywhere) and
cut with :func:`ppir.torch.split_layers`: stage 0 runs the token and position embeddings, the
last stage the final norm and the LM head, and the transformer blocks are spread over all
stages.  GPT-2 ties the LM head's weight to the token embedding: ``split_layers`` finds the
shared parameter, so the runtime sums its gradient across the ranks holding a copy and the
copies stay identical (check it with ``--verify-grads --verify-steps 3``).

    ppir launch -n 2 1f1b -D M=4 --module examples/hf_gpt2.py --steps 20
    ppir launch -n 2 zbv -D M=4 --module examples/hf_gpt2.py --verify-grads --verify-steps 3

Options (``--module-opt KEY=VALUE``): vocab, d_model, heads, layers, seq, batch, seed, act (the
MLP's activation: GPT-2's own ``gelu_new``, written out as elementwise ops that keep four
FFN-wide tensors for backward; ``gelu_pytorch_tanh``, the same function as one kernel that keeps
one).  Needs
``pip install 'ppir[torch,hf]'`` (transformers).  Plain SGD (``--lr``) is the optimizer.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIG = {
    "vocab": 96,
    "d_model": 32,
    "heads": 4,
    "layers": 4,
    "seq": 16,
    "batch": 8,
    "seed": 0,
    "act": "gelu_new",
}
_STAGES: dict = {}


def configure(**options) -> None:
    unknown = set(options) - set(CONFIG)
    if unknown:
        raise ValueError(f"unknown hf_gpt2 options {sorted(unknown)}; known: {sorted(CONFIG)}")
    CONFIG.update(options)
    _STAGES.clear()


class Embeddings(nn.Module):
    """GPT-2's input side: token + position embeddings, dropout."""

    def __init__(self, transformer):
        super().__init__()
        self.wte, self.wpe, self.drop = transformer.wte, transformer.wpe, transformer.drop

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        return self.drop(self.wte(ids) + self.wpe(pos))


class Head(nn.Module):
    """GPT-2's output side: final layer norm, LM head (weight tied to the token embedding)."""

    def __init__(self, model):
        super().__init__()
        self.ln_f, self.lm_head = model.transformer.ln_f, model.lm_head

    def forward(self, h):
        return self.lm_head(self.ln_f(h))


def build_model():
    from transformers import GPT2Config, GPT2LMHeadModel

    c = CONFIG
    config = GPT2Config(
        vocab_size=c["vocab"],
        n_positions=c["seq"],
        n_embd=c["d_model"],
        n_layer=c["layers"],
        n_head=c["heads"],
        activation_function=c["act"],
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(c["seed"])
    return GPT2LMHeadModel(config)


def stages(num_stages: int) -> list:
    if num_stages not in _STAGES:
        from ppir.torch import split_layers

        model = build_model()
        _STAGES[num_stages] = split_layers(
            model.transformer.h,
            num_stages,
            first=Embeddings(model.transformer),
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
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
