"""The user's model module: loading it, checking its API, splitting batches into microbatches.

A model module (a ``.py`` path or a dotted module name) provides

* ``build_stage(stage: int, num_stages: int) -> torch.nn.Module`` for a global virtual stage;
  it must be deterministic (set the random generator inside it) so that every rank and the
  single-process reference build the same parameters;
* ``make_batch(step: int) -> (inputs, targets)``: the whole mini-batch of that step, tensors whose
  dim 0 is the batch dimension (split into M equal microbatches);
* ``loss_fn(output, target) -> scalar tensor``: the mean loss over one microbatch;
* optionally ``make_optimizer(params) -> torch.optim.Optimizer`` and ``configure(**options)``
  (called with ``--model-opt KEY=VALUE`` options before anything else).

A stage takes one tensor and returns one tensor.  Problems are raised as :class:`ModelError`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import torch

REQUIRED = ("build_stage", "make_batch", "loss_fn")


class ModelError(ValueError):
    """The model module is missing something or returned something unusable."""


def load_model(spec: str, options: dict | None = None):
    """Import the model module named by ``spec`` (a .py path or a dotted name), check its API
    and apply ``configure(**options)``."""
    mod = _import(spec)
    missing = [n for n in REQUIRED if not callable(getattr(mod, n, None))]
    if missing:
        raise ModelError(
            f"model {spec!r} lacks {', '.join(missing)} "
            f"(a model module defines {', '.join(REQUIRED)})"
        )
    if options:
        if not callable(getattr(mod, "configure", None)):
            raise ModelError(f"model {spec!r} takes no options (it has no configure())")
        mod.configure(**options)
    return mod


def _import(spec: str) -> ModuleType:
    path = Path(spec)
    if spec.endswith(".py") or path.is_file():
        if not path.is_file():
            raise ModelError(f"model file {spec} does not exist")
        name = f"ppir_user_model_{path.stem}"
        if name in sys.modules:
            return sys.modules[name]
        loader = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(loader)
        sys.modules[name] = mod
        loader.loader.exec_module(mod)
        return mod
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as e:
        raise ModelError(f"cannot import model {spec!r}: {e}") from None


def parse_options(items: list[str]) -> dict:
    """``["layers=4", "lr=0.1", "name=x"]`` -> {"layers": 4, "lr": 0.1, "name": "x"}."""
    out: dict = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.isidentifier():
            raise ModelError(f"--model-opt {item}: expected KEY=VALUE")
        for conv in (int, float):
            try:
                out[key] = conv(value)
                break
            except ValueError:
                continue
        else:
            out[key] = value
    return out


def build_stages(model, stages: list[int], num_stages: int, device, rank: int) -> list:
    """``build_stage`` for each stage, moved to ``device``; ModelError naming the rank and stage
    when the factory returns anything but an ``nn.Module``."""
    out = []
    for s in stages:
        mod = model.build_stage(s, num_stages)
        if not isinstance(mod, torch.nn.Module):
            raise ModelError(
                f"rank {rank}: build_stage({s}, {num_stages}) returned "
                f"{type(mod).__name__}, expected a torch.nn.Module"
            )
        out.append(mod.to(device))
    return out


def split_batch(model, step: int, microbatches: int, device, rank: int):
    """``make_batch(step)`` split into M equal microbatches: (inputs list, targets list)."""
    batch = model.make_batch(step)
    if not (
        isinstance(batch, (tuple, list))
        and len(batch) == 2
        and all(isinstance(t, torch.Tensor) for t in batch)
    ):
        raise ModelError(
            f"rank {rank}: make_batch({step}) must return (inputs, targets) "
            f"tensors, got {type(batch).__name__}"
        )
    parts = []
    for name, t in zip(("inputs", "targets"), batch):
        if t.dim() == 0 or t.shape[0] % microbatches:
            raise ModelError(
                f"rank {rank}: make_batch({step}) {name} have shape "
                f"{tuple(t.shape)}: dim 0 must split into {microbatches} equal "
                "microbatches"
            )
        parts.append(list(t.to(device).chunk(microbatches)))
    return parts[0], parts[1]


def check_loss(loss, stage: int, mb: int, rank: int):
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise ModelError(
            f"rank {rank}: loss_fn on stage {stage}, microbatch {mb} returned "
            f"{shape}; it must return a scalar tensor (the microbatch mean)"
        )
    return loss.reshape(())


class PlainSGD:
    """``p -= lr * grad``: the default optimizer.  (Constructing any ``torch.optim`` optimizer
    imports torch._dynamo, seconds of start-up per rank.)"""

    def __init__(self, params, lr: float):
        self.params, self.lr = list(params), lr

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        for p in self.params:
            if p.grad is not None:
                p.add_(p.grad, alpha=-self.lr)


def make_optimizer(model, params, lr: float):
    """The model's ``make_optimizer(params)``, else :class:`PlainSGD` with rate ``lr``."""
    if callable(getattr(model, "make_optimizer", None)):
        return model.make_optimizer(params)
    return PlainSGD(params, lr)
