"""A small GPT-style model split into pipeline stages: the model API of ppir's runtime.

Stage 0 holds the token and position embeddings, the last stage the final norm and the
language-model head; the transformer blocks are spread evenly over all stages (a stage may get
none when there are more stages than blocks).  Data is generated locally and deterministically
from the step number: each sequence counts up modulo the vocabulary with a stride of 1, 2 or 3
chosen per sequence, so the next token is predictable from the context and the loss falls from
about ln(vocab) towards zero as the model learns to read the stride.

Run it pipelined::

    ppir launch -n 4 1f1b -D M=8 --module examples/gpt_model.py --steps 40
    ppir launch -n 2 interleaved_1f1b -D M=4 -D v=2 --module examples/gpt_model.py --verify-grads

Options (``--module-opt KEY=VALUE``): vocab, d_model, heads, layers, seq, batch, lr, seed.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIG = {
    "vocab": 64,
    "d_model": 64,
    "heads": 4,
    "layers": 4,
    "seq": 16,
    "batch": 16,
    "lr": 3e-3,
    "seed": 0,
}


def configure(**options) -> None:
    """Override CONFIG entries (called by the runtime with ``--module-opt`` values)."""
    unknown = set(options) - set(CONFIG)
    if unknown:
        raise ValueError(f"unknown gpt_model options {sorted(unknown)}; known: {sorted(CONFIG)}")
    CONFIG.update(options)


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention, then an MLP."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class Stage(nn.Module):
    """One pipeline stage: [embeddings] + blocks + [final norm and head]."""

    def __init__(self, first: bool, last: bool, blocks: int):
        super().__init__()
        c = CONFIG
        d = c["d_model"]
        self.first, self.last = first, last
        if first:
            self.tok = nn.Embedding(c["vocab"], d)
            self.pos = nn.Embedding(c["seq"], d)
        self.blocks = nn.ModuleList(Block(d, c["heads"]) for _ in range(blocks))
        if last:
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, c["vocab"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.first:
            x = self.tok(x) + self.pos(torch.arange(x.shape[1], device=x.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x)) if self.last else x


def blocks_of(stage: int, num_stages: int) -> int:
    """Blocks are spread as evenly as possible; earlier stages get the remainder."""
    n = CONFIG["layers"]
    return n // num_stages + (1 if stage < n % num_stages else 0)


def build_stage(stage: int, num_stages: int) -> nn.Module:
    torch.manual_seed(CONFIG["seed"] * 1000 + stage)
    return Stage(stage == 0, stage == num_stages - 1, blocks_of(stage, num_stages))


def make_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens, next tokens), each [batch, seq], deterministic in ``step``."""
    c = CONFIG
    g = torch.Generator().manual_seed(10_000 + step)
    start = torch.randint(0, c["vocab"], (c["batch"], 1), generator=g)
    stride = torch.randint(1, 4, (c["batch"], 1), generator=g)
    seq = (start + stride * torch.arange(c["seq"] + 1)) % c["vocab"]
    return seq[:, :-1], seq[:, 1:]


def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def make_optimizer(params):
    return torch.optim.Adam(params, lr=CONFIG["lr"])
