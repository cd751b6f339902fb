"""A model module that misbehaves on purpose (the fault-injection tests, via ``--module-opt``).

``mode``: ``raise`` (stage 1 raises in step 1), ``hang`` (stage 1 sleeps in step 1), ``shape``
(stage 0 returns a wrong shape in step 1), ``nanloss`` (the loss of step 1, microbatch 2 is NaN),
``exit`` (stage 1 calls ``os._exit(3)`` in step 1), ``leave`` (stage 1 calls ``os._exit(0)``
in step 1, as if its rank had finished), ``hang_batch`` (rank 0's ``make_batch(1)``
sleeps), ``slow`` (every forward sleeps 0.1 s, for kill tests), ``none``.  ``piddir``: each rank
writes ``rank<R>.pid`` there once its stages are built.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
import torch.nn as nn

CONFIG = {"mode": "none", "piddir": ""}
CALLS = {"loss": 0}


def configure(**options) -> None:
    CONFIG.update(options)


class Stage(nn.Module):
    def __init__(self, stage: int):
        super().__init__()
        self.lin, self.stage, self.calls = nn.Linear(4, 4), stage, 0

    def forward(self, x):
        self.calls += 1
        mode = CONFIG["mode"]
        if mode == "slow":
            time.sleep(0.1)
        if self.stage == 1 and self.calls == 6:  # step 1, microbatch 1 (after the probe)
            if mode == "raise":
                raise ValueError("boom in stage 1")
            if mode == "hang":
                time.sleep(600)
            if mode == "exit":
                os._exit(3)
            if mode == "leave":
                os._exit(0)
        y = self.lin(x)
        if mode == "shape" and self.stage == 0 and self.calls == 6:
            y = torch.cat([y, y[:, :1]], dim=1)
        return y


def build_stage(stage, num_stages):
    torch.manual_seed(stage)
    if CONFIG["piddir"]:
        Path(CONFIG["piddir"], f"rank{os.environ.get('RANK', '0')}.pid").write_text(
            str(os.getpid())
        )
    return Stage(stage)


def make_batch(step):
    if CONFIG["mode"] == "hang_batch" and step == 1 and os.environ.get("RANK") == "0":
        time.sleep(600)  # a data loader stuck on one rank, while the steps check make_batch
    g = torch.Generator().manual_seed(step)
    return torch.randn(8, 4, generator=g), torch.randn(8, 4, generator=g)


def loss_fn(y, t):
    CALLS["loss"] += 1
    loss = ((y - t) ** 2).mean()
    if CONFIG["mode"] == "nanloss" and CALLS["loss"] == 4 + 3:  # step 1, microbatch 2
        loss = loss * float("nan")
    return loss
