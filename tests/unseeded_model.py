"""A model module whose ``make_batch`` forgets to seed its generator: it draws from torch's
global generator, which each rank's ``build_stage`` seeds differently, so stage 0's rank and
the last stage's rank see different batches (the labels no longer match the inputs).  The
runtime's batch check must stop it at step 0, naming the ranks."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


def build_stage(stage: int, num_stages: int) -> nn.Module:
    torch.manual_seed(1000 + stage)
    return nn.Linear(4, 4) if stage < num_stages - 1 else nn.Linear(4, 2)


def make_batch(step: int):
    x = torch.randn(8, 4)  # unseeded: not a function of step alone
    return x, (x[:, 0] > 0).long()


def loss_fn(logits, target):
    return F.cross_entropy(logits, target)
