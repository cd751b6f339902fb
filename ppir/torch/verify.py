"""``--verify-grads`` (and ``--verify-steps N``): pipelined training against single-process
training on the global batch.

At start-up every rank takes a private copy of all stages (:func:`.reference.reference_modules`,
before any step).  After step 0's backward it compares its stages' gradients (after the
data-parallel and tied reductions) and the loss with the reference's; with ``--verify-steps N``
the reference is also trained for N steps with the same optimizer, and after N optimizer steps
every parameter is compared, and the copies of each tied parameter with each other.  The largest
differences are all-reduced, so every rank reaches the same verdict; rank 0 prints it.
The time spent in the checks (the reference's own training among them) is kept in ``seconds``,
so that the step times ``ppir.run`` prints leave it out.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from ppir.diagnostics import count, rank_list
from ppir.torch.errors import SetupError
from ppir.torch.model import make_optimizer
from ppir.torch.objects import all_gather_objects
from ppir.torch.reference import (
    loss_split,
    max_grad_diff,
    max_param_diff,
    reference_modules,
    reference_step,
    stage_grads,
    unique_parameters,
)
from ppir.torch.split import find_shared


class Verifier:
    def __init__(self, ctx, plan: dict, model, rt, mesh, args):
        self.ctx, self.plan, self.model, self.rt, self.args = ctx, plan, model, rt, args
        self.steps = args.verify_steps or 0
        self.parts = plan["microbatches"] * mesh.dp_size  # the slices whose losses are averaged
        self.failure = ""  # what failed, for the launcher's one-line report
        self.seconds = 0.0  # spent in after_backward and after_step, not in the pipeline's step
        self.ref = reference_modules(model, plan["stages"], ctx.device)
        self.ref_params = unique_parameters(self.ref)
        self.ref_opt = make_optimizer(model, self.ref_params, args.lr) if self.steps else None
        self.shared = find_shared(self.ref)
        declared = {  # the stages' declared ties: holder stages -> the model's name
            _stages(e): e["name"] for m in rt.stages for e in getattr(m, "ppir_shared", ())
        }
        self._check_declared(self.shared, declared)
        for e in self.shared:  # the model's own names, where the stages declare them
            e["name"] = declared.get(_stages(e), e["name"])

    def _check_declared(self, shared: list[dict], declared: dict) -> None:
        placement = self.plan["placement"]
        untied = declared.keys() - {_stages(e) for e in shared}
        if untied:
            stages = min(untied, key=sorted)
            raise SetupError(
                f"rank {self.ctx.rank}: the stages declare a parameter shared by stages "
                f"{sorted(stages)}, but build_stage builds those stages with separate tensors "
                "for it, so the single-process reference would train it untied (does "
                "build_stage make a new model at each call?): build the model once per process "
                "and split that one (cache it in the module)"
            )
        for e in shared:
            stages = _stages(e)
            if len({placement[s] for s in stages}) > 1 and stages not in declared:
                where = ", ".join(f"{n!r} of stage {s}" for s, n in e["holders"])
                raise SetupError(
                    f"rank {self.ctx.rank}: parameter {e['name']!r} is one tensor in "
                    f"{where}, but the stages do not declare it shared, so the copies on "
                    f"{rank_list(sorted({placement[s] for s in stages}))} would train apart: "
                    "build the stages with ppir.torch.split_layers (or pass shared=...)"
                )

    def _worst(self, *values: float) -> list[float]:
        t = torch.tensor(values, dtype=torch.float64, device=self.ctx.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.tolist()

    def _say(self, head: str, detail: str | None) -> None:
        """Rank 0 prints ``head``, then every rank's ``detail`` (None: it has none) in rank
        order: one process writes them all, so they come in that order (each rank printing
        its own line raced rank 0's head)."""
        details = all_gather_objects(detail)
        if self.ctx.rank == 0:
            print("\n".join([head, *(d for d in details if d)]), flush=True)

    def after_backward(self, step: int, loss) -> bool:
        return self._timed(self._after_backward, step, loss)

    def after_step(self, step: int) -> bool:
        return self._timed(self._after_step, step)

    def _timed(self, check, *args) -> bool:
        t0 = time.perf_counter()
        try:
            return check(*args)
        finally:
            self.seconds += time.perf_counter() - t0

    def _after_backward(self, step: int, loss) -> bool:
        if step >= max(1, self.steps):
            return True
        for p in self.ref_params:
            p.grad = None
        kept: dict = {}
        ref_loss = reference_step(self.ref, self.model, step, self.ctx.device, kept)
        if step:
            return True
        gdiff, where = max_grad_diff(self.rt.stages, self.rt.stage_ids, stage_grads(self.ref))
        ldiff = abs(loss.item() - ref_loss.item()) if loss is not None else 0.0
        gmax, lmax, batch_norm, dropout = self._worst(
            gdiff, ldiff, float(_batch_norm(self.rt.stages)), float(_dropout(self.rt.stages))
        )
        tol = self.args.tolerance
        ok = gmax <= tol and lmax <= tol
        self._say(
            f"verify-grads: largest |grad diff| {gmax:.3e}, |loss diff| {lmax:.3e} "
            f"(tolerance {tol:g}): {'OK' if ok else 'FAILED'}",
            f"verify-grads: rank {self.ctx.rank}: largest difference at {where}: {gdiff:.3e}"
            if gdiff > tol
            else None,
        )
        if not ok:
            self.failure = (
                f"--verify-grads: step 0's gradients or loss differ from single-process "
                f"training by {max(gmax, lmax):.3e}, above --tolerance {tol:g} (see above)"
            )
            if batch_norm:  # on any rank: every rank says so
                self.failure += (
                    "; the stages train BatchNorm, whose statistics over a microbatch are not "
                    "those over the whole batch, so a difference is expected (docs/executor.md)"
                )
            if dropout:
                self.failure += (
                    "; the stages hold dropout in training mode, whose random masks differ "
                    "between the pipelined run and the reference: verify with dropout off (p=0)"
                )
            self.failure += self._loss_not_a_mean(kept, tol)
        return ok

    def _loss_not_a_mean(self, kept: dict, tol: float) -> str:
        """Why, when ``loss_fn`` is no mean over equally weighted samples: the pipeline
        averages its microbatches' losses, which then weigh the samples otherwise than the
        whole batch's loss does (every rank holds the reference: no communication)."""
        split = loss_split(self.model.loss_fn, kept["output"], kept["target"], self.parts)
        if split is None or not split.differs(tol):
            return ""
        whole, mean = split.whole, split.mean
        return (
            f"; loss_fn is not a mean over equally weighted samples: on the reference's output "
            f"the whole batch's loss is {whole:.6g}, the mean of its {self.parts} microbatches' "
            f"losses {mean:.6g}, which the pipeline trains on (a mean over a count that varies "
            "per microbatch, such as cross_entropy over labels with ignore_index=-100 or "
            "padding): divide a summed loss by a count that is the same for every microbatch, "
            "e.g. cross_entropy(..., reduction='sum') / target.numel() (docs/executor.md)"
        )

    def _after_step(self, step: int) -> bool:
        if not self.steps or step >= self.steps:
            return True
        self.ref_opt.step()
        if step != self.steps - 1:
            return True
        pdiff, where = max_param_diff(self.rt.stages, self.rt.stage_ids, self.ref)
        drift = self.rt.reducer.tied_drift()
        pmax, dmax = self._worst(pdiff, drift)
        tol = self.args.tolerance
        ok = pmax <= tol and dmax == 0.0
        names = {e["name"]: [s for s, _ in e["holders"]] for e in self.shared}
        tied = "; ".join(f"tied {n!r} on stages {h}" for n, h in names.items())
        copies = f"; tied copies differ by at most {dmax:.3e}" if names else ""
        self._say(
            f"verify-params: after {count(self.steps, 'optimizer step')}, largest |param diff| "
            f"{pmax:.3e} (tolerance {tol:g}){copies}: "
            f"{'OK' if ok else 'FAILED'}" + (f" ({tied})" if tied else ""),
            f"verify-params: rank {self.ctx.rank}: largest difference at {where}: {pdiff:.3e}"
            if pdiff > tol
            else None,
        )
        if dmax:
            self.failure = (
                f"--verify-steps {self.steps}: tied copies of a parameter differ by {dmax:.3e} "
                "after the optimizer steps (they must stay equal; see above)"
            )
        elif not ok:
            self.failure = (
                f"--verify-steps {self.steps}: parameters differ from single-process training "
                f"by {pmax:.3e} after {count(self.steps, 'optimizer step')}, above "
                f"--tolerance {tol:g} "
                "(see above); an optimizer that normalises the gradient, such as Adam, "
                "amplifies round-off: compare such runs with a looser --tolerance, e.g. 1e-4"
            )
        return ok


def _batch_norm(stages) -> bool:
    """Whether a stage holds a BatchNorm layer in training mode (it couples the samples of a
    batch: microbatches see other statistics than the whole batch)."""
    norms = torch.nn.modules.batchnorm._BatchNorm
    return any(isinstance(m, norms) and m.training for s in stages for m in s.modules())


def _dropout(stages) -> bool:
    """Whether a stage holds a dropout layer with p > 0 in training mode (its masks are random:
    the pipelined run draws others than the single-process reference)."""
    drops = torch.nn.modules.dropout._DropoutNd
    return any(isinstance(m, drops) and m.training and m.p > 0 for s in stages for m in s.modules())


def _stages(entry: dict) -> frozenset:
    """The stages holding a shared parameter (a ``find_shared`` or ``ppir_shared`` entry)."""
    return frozenset(s for s, _ in entry["holders"])
