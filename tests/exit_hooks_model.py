"""A model module that leaves work to the end of its rank's process, as training scripts do:
an ``atexit`` handler and a log file opened at import and never closed (its last lines still
in the buffer).  ``ppir.run`` ends a rank without finalising the interpreter
(:mod:`ppir.torch.leave`); both must still reach the disk.  ``configure(out=DIR)`` says where."""

from __future__ import annotations

import atexit
import os
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

_log = None


def configure(out: str) -> None:
    global _log
    rank = os.environ.get("RANK", "0")
    _log = open(Path(out) / f"log.{rank}", "w", buffering=1 << 16)  # noqa: SIM115 - left open
    atexit.register(lambda: (Path(out) / f"atexit.{rank}").write_text("ran\n"))


def build_stage(stage: int, num_stages: int) -> nn.Module:
    torch.manual_seed(stage)
    return nn.Linear(4, 4) if stage < num_stages - 1 else nn.Linear(4, 2)


def make_batch(step: int):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(8, 4, generator=g)
    return x, (x[:, 0] > 0).long()


def loss_fn(logits, target):
    _log.write(f"loss {float(logits.detach().sum()):.3f}\n")  # buffered: flushed only at the end
    return F.cross_entropy(logits, target)
