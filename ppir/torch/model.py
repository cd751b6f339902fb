"""The model-module contract of ``ppir.run`` / ``ppir launch --module``: loading the module,
checking its API, building stages and cutting batches into microbatches.

A model module (a ``.py`` path or a dotted module name) provides

* ``build_stage(stage: int, num_stages: int) -> torch.nn.Module`` for a global virtual stage;
  it must be deterministic (set the random generator inside it) so that every rank and the
  single-process reference build the same parameters.  Tied parameters (an embedding shared
  with the head) are declared by building the stages with :func:`ppir.torch.split_layers`;
* ``make_batch(step: int) -> (inputs, targets)``: the whole global batch of that step, each a
  tensor or a tuple/list/dict of tensors whose dim 0 is the batch dimension (cut into one
  equal slice per data-parallel replica, then M equal microbatches).  It must give every rank
  the same batch for a step (deterministic in ``step``: seed its generator from it), since
  stage 0's rank uses the inputs and the last stage's rank the targets;
  :func:`check_same_batch` checks that over the first steps;
* ``loss_fn(output, target) -> scalar tensor``: the mean loss over one microbatch;
* optionally ``make_optimizer(params) -> torch.optim.Optimizer`` and ``configure(**options)``
  (called with ``--module-opt KEY=VALUE`` options before anything else).

Problems are raised as :class:`ModelError` naming the rank.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType

import torch

from ppir.cli.argtypes import key_values, module_folder_note, module_names_a_file
from ppir.torch import values as V
from ppir.torch.errors import ModelError
from ppir.torch.signatures import (
    REQUIRED,
    check_functions,
    check_options,
    lacks_message,
)


def load_model(spec: str, options: dict | None = None):
    """Import the model module named by ``spec`` (a .py path or a dotted name), check its API
    and apply ``configure(**options)``."""
    mod = _import(spec)
    missing = [n for n in REQUIRED if not callable(getattr(mod, n, None))]
    if missing:
        own = sorted(
            n
            for n, v in vars(mod).items()
            if callable(v)
            and not n.startswith("_")
            and getattr(v, "__module__", None) == mod.__name__
        )
        raise ModelError(lacks_message(spec, missing, own, module_folder_note(spec, "them")))
    check_functions(spec, mod)
    if options:
        if not callable(getattr(mod, "configure", None)):
            raise ModelError(f"model {spec!r} takes no options (it has no configure())")
        check_options(spec, mod.configure, options)
        mod.configure(**options)
    return mod


_FILE_MODULES: dict[Path, ModuleType] = {}  # model files imported, by resolved path


def _import(spec: str) -> ModuleType:
    path = Path(spec)
    if module_names_a_file(spec):
        if not path.is_file():
            folder = module_folder_note(spec)
            raise ModelError(f"model {folder}" if folder else f"model file {spec} does not exist")
        resolved = path.resolve()
        mod = _FILE_MODULES.get(resolved)
        if mod is not None:  # imported once per file, however it is named
            return mod
        name, k = f"ppir_user_model_{path.stem}", 1
        while name in sys.modules:  # another file of the same name
            k += 1
            name = f"ppir_user_model_{path.stem}_{k}"
        # as ``python file.py`` runs it: the module's own folder first on the path, so that it
        # imports the files beside it
        folder = str(resolved.parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        loader = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(loader)
        sys.modules[name] = mod
        try:
            loader.loader.exec_module(mod)
        except BaseException:
            del sys.modules[name]  # as import does: no half-made module is kept
            raise
        _FILE_MODULES[resolved] = mod
        return mod
    # a dotted name is found as ``python -m`` finds it (the ranks' way): the working directory
    # first on the path
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as e:
        if e.name is None or not (spec == e.name or spec.startswith(e.name + ".")):
            raise  # the model is there but lacks one of its imports: the user's traceback
        raise ModelError(f"cannot import model {spec!r}: {e}") from None


def parse_options(items: list[str]) -> dict:
    """``["layers=4", "lr=0.1", "name=x"]`` -> {"layers": 4, "lr": 0.1, "name": "x"}."""
    try:
        return key_values(items, "--module-opt")
    except ValueError as e:
        raise ModelError(str(e)) from None


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


def global_batch(model, step: int, device, rank: int):
    """``make_batch(step)`` checked and moved to ``device``: (inputs, targets)."""
    batch = model.make_batch(step)
    if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
        got = type(batch).__name__
        if isinstance(batch, (tuple, list)):
            got = f"a {got} of {len(batch)}"
        raise ModelError(
            f"rank {rank}: make_batch({step}) must return (inputs, targets), got {got}"
        )
    try:
        for name, value in zip(("inputs", "targets"), batch):
            V.check_batch(value, f"make_batch({step})", name)
        return tuple(V.to_device(b, device) for b in batch)
    except TypeError as e:
        raise ModelError(f"rank {rank}: {e}") from None


def split_batch(
    model, step: int, microbatches: int, device, rank: int, *, replicas: int = 1, replica: int = 0
):
    """This replica's slice of ``make_batch(step)`` cut into M equal microbatches:
    (inputs list, targets list)."""
    parts = []
    for name, value in zip(("inputs", "targets"), global_batch(model, step, device, rank)):
        where = f"rank {rank}: make_batch({step}) {name}"
        try:
            if replicas > 1:
                value = V.split_batch(value, replicas, where, "data-parallel replica")[replica]
                where += f" (replica {replica}'s slice)"
            parts.append(V.split_batch(value, microbatches, where))
        except (TypeError, ValueError) as e:
            raise ModelError(str(e)) from None
    return parts[0], parts[1]


CHECKED_STEPS = 3  # steps 0..2: make_batch is compared across ranks (check_same_batch)


def check_same_batch(inputs: list, targets: list, step: int, ctx, dp: int) -> None:
    """Collective over the default group: each rank's fingerprint of its slice of
    ``make_batch(step)`` (a few sums of inputs and targets, one small all_gather); ModelError
    naming the step and the ranks whose batch differs from their replica's first rank (global
    rank ``r`` trains replica ``r % dp``).  A cheap check, not a proof: equal sums pass.  A peer
    that does not join within ``ctx.timeout_s`` (slow or stuck before its step) is a
    :class:`CommError`, as it is at any instruction of the step."""
    import torch.distributed as dist

    from ppir.torch.errors import comm_error

    rank, device = ctx.rank, ctx.device
    mine = torch.tensor([*_fingerprint(inputs), *_fingerprint(targets)], dtype=torch.float64)
    every = [torch.empty_like(mine, device=device) for _ in range(dist.get_world_size())]
    try:
        dist.all_gather(every, mine.to(device))
    except RuntimeError as e:
        where = f"rank {rank}: comparing make_batch({step}) across the ranks"
        raise comm_error(where, (), e, ctx.timeout_s) from None
    every = [t.cpu() for t in every]
    for replica in range(dp):
        ranks = list(range(replica, len(every), dp))
        first = every[ranks[0]]
        bad = [r for r in ranks[1:] if not same_fingerprint(every[r], first)]
        if bad:
            raise ModelError(
                f"rank {rank}: make_batch({step}) gave rank {ranks[0]} and rank"
                f"{'s' if len(bad) > 1 else ''} {', '.join(map(str, bad))} different batches: "
                "every rank must get the same batch for a step (stage 0's rank uses its inputs, "
                "the last stage's rank its targets); seed make_batch from step, e.g. "
                "torch.Generator().manual_seed(step)"
            )


def same_fingerprint(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two ranks' batch fingerprints agree: within round-off, a NaN (a batch that holds
    one, which the loss check reports) equal to a NaN, an infinity to the same infinity."""
    return torch.allclose(a, b, rtol=1e-6, atol=1e-6, equal_nan=True)


def _fingerprint(microbatches: list) -> tuple[float, float]:
    """(sum, position-weighted sum) over every leaf of the microbatches, in float64."""
    total = weighted = 0.0
    for value in microbatches:
        for leaf in V.flatten(value)[0]:
            x = leaf.detach().reshape(-1).to(torch.float64)
            w = torch.arange(x.numel(), dtype=torch.float64, device=x.device) % 7 + 1
            total += float(x.sum())
            weighted += float((x * w).sum())
    return total, weighted


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


DEFAULT_LR = 0.01  # PlainSGD's rate when --lr is not given


def make_optimizer(model, params, lr: float | None):
    """The model's ``make_optimizer(params)``, else :class:`PlainSGD` with rate ``lr``
    (:data:`DEFAULT_LR` when None); ModelError when the model's returns no optimizer (``None``
    from a forgotten ``return``: the run would train nothing and say nothing)."""
    if callable(getattr(model, "make_optimizer", None)):
        opt = model.make_optimizer(params)
        if not all(callable(getattr(opt, f, None)) for f in ("step", "zero_grad")):
            raise ModelError(
                f"make_optimizer returned {type(opt).__name__}, not an optimizer (an object "
                "with step() and zero_grad()): does it return the optimizer it makes?"
            )
        return opt
    return PlainSGD(params, DEFAULT_LR if lr is None else lr)


def optimizer_state_bytes(model, params: list, why: list | None = None) -> int:
    """Bytes of the state the model's optimizer (``make_optimizer``, else the runtime's plain
    SGD, which keeps none) holds for ``params`` after one step; -1 when it cannot be made or
    stepped here (an optimizer that needs a process group of its own, a mistake in
    ``make_optimizer``, ...), the exception's traceback then appended to ``why`` when given.
    Run after the measurements: the step changes the parameters."""
    if not params:
        return 0
    try:
        opt = make_optimizer(model, params, 0.0)
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        opt.step()
    except Exception:  # noqa: BLE001 - the user's optimizer: not measured, said in the file
        if why is not None:
            why.append(traceback.format_exc())
        return -1
    state = getattr(opt, "state", {}) or {}
    return sum(
        t.numel() * t.element_size()
        for st in state.values()
        for t in (st.values() if isinstance(st, dict) else ())
        if isinstance(t, torch.Tensor)
    )


def scalar_loss(loss, stage: int, mb: int, rank: int):
    """``loss`` (what ``loss_fn`` returned on ``stage`` for microbatch ``mb``) as a 0-d tensor;
    :class:`ModelError` naming ``rank``, the stage and the microbatch unless it is a tensor of
    one element that (with grad enabled) requires grad.  The runtime's executor and
    ``ppir profile`` check the loss with it alike."""
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise ModelError(
            f"rank {rank}: loss_fn on stage {stage}, microbatch {mb} returned "
            f"{shape}; it must return a scalar tensor (the microbatch mean)"
        )
    if torch.is_grad_enabled() and not loss.requires_grad:
        raise ModelError(
            f"rank {rank}: loss_fn on stage {stage}, microbatch {mb} returned a tensor that "
            "does not require grad: it must be computed from the stage's output by autograd "
            "(not a constant, not under torch.no_grad(), not detached)"
        )
    return loss.reshape(())


def nonfinite_loss(losses, rank: int, stage: int, when: str) -> str | None:
    """The runtime's report of a NaN or infinite loss, ``rank R: the loss is nan at WHEN,
    microbatch M (stage S)``, for the first of ``losses`` ((microbatch, 0-d loss tensor) pairs,
    in the order they ran) that is not finite; None when each is finite.  The executor checks a
    step's losses with it, ``ppir profile`` each microbatch's."""
    bad = next(((m, v.item()) for m, v in losses if not bool(torch.isfinite(v))), None)
    if bad is None:
        return None
    return f"rank {rank}: the loss is {bad[1]} at {when}, microbatch {bad[0]} (stage {stage})"
