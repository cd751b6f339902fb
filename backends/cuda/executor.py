"""Interpret one rank's program of a ``ppir.plan/1`` plan for one training step.

Contract:

* Instructions run strictly in plan order; the executor makes no scheduling decision.  A
  ``group`` is posted with one ``dist.batch_isend_irecv`` call holding its ops in plan order and
  is waited on before the next instruction (a group completes as a unit, as the verifier
  assumes).
* A ``group`` marked ``deferred`` (the IR's ``post[...]``) is posted the same way and not
  waited on; its ``wait`` instruction (the IR's ``wait[...]``) waits on its requests and only
  then makes the received values available.
* Receive buffers are allocated when their group is posted, from the boundary metadata; a value
  is dropped at its single read (see :mod:`.plan`), and a stage's saved activations are dropped
  by its B (or W), so memory follows what the schedule keeps in flight.
* Each stage runs as its own autograd graph: its input is a leaf requiring grad, and the
  gradient of that leaf is what SEND_B carries (or hands over locally on a V fold).
* The last stage's loss is ``loss_fn(output, target) / M``: with equal microbatches the
  gradients accumulated over a step equal single-process training on the whole mini-batch, and
  :meth:`Executor.step` returns the mini-batch loss (on the rank holding the last stage).
* I computes the input gradient with ``torch.autograd.grad(..., inputs=[x], retain_graph=True)``;
  W then computes the weight gradients with ``inputs=params`` and accumulates them into
  ``param.grad``.
* A tensor whose shape or dtype disagrees with the metadata raises :class:`ShapeMismatch`
  naming rank, instruction and both shapes, before anything is posted.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from ppir.backends.cuda.model import check_loss
from ppir.backends.cuda.plan import boundary_of

Meta = dict[int, tuple[tuple[int, ...], torch.dtype]]


class ShapeMismatch(RuntimeError):
    """A tensor disagrees with the plan's shape/dtype metadata."""


def describe(shape, dtype) -> str:
    return f"{tuple(shape)} {str(dtype).replace('torch.', '')}"


class Executor:
    """Runs ``plan["programs"][rank]`` with ``modules[chunk]`` (the rank's stages, ascending)."""

    def __init__(
        self, plan: dict, rank: int, modules: list, loss_fn, meta: Meta, device, group=None
    ):
        self.program = plan["programs"][rank]
        self.rank = rank
        self.stages = plan["stages_of_rank"][rank]
        self.modules = modules
        self.loss_fn = loss_fn
        self.meta = meta
        self.device = device
        self.group = group
        self.scale = 1.0 / plan["microbatches"]
        self.last = plan["stages"] - 1
        self.peak_saved = 0  # most (stage, mb) activations held at once during the last step
        self._params = [[p for p in m.parameters() if p.requires_grad] for m in modules]

    # ------------------------------------------------------------------ one step
    def step(self, inputs: list, targets: list):
        """Run the program once; returns the mini-batch loss tensor on the rank holding the last
        stage, else None.  Gradients accumulate into ``param.grad`` (zero them before)."""
        self.bufs: dict[str, torch.Tensor] = {}
        self.saved: dict[tuple[int, int], tuple] = {}
        self.weight_todo: dict[tuple[int, int], tuple] = {}
        self.pending: dict[int, tuple] = {}  # deferred groups posted, not yet waited on
        self.inputs, self.targets = inputs, targets
        self.loss = None
        self.peak_saved = 0
        for i, ins in enumerate(self.program):
            self.index = i
            getattr(self, "_op_" + ins["op"])(ins)
        if self.pending:
            raise RuntimeError(
                f"rank {self.rank}: {len(self.pending)} deferred group(s) posted "
                "but never waited on in this step"
            )
        left = [k for k in self.bufs] + [f"{s}:{m}" for s, m in self.saved]
        if left:
            raise RuntimeError(
                f"rank {self.rank}: the plan left values unused at the end of "
                f"the step: {', '.join(sorted(left))}"
            )
        return self.loss

    def _where(self, ins) -> str:
        return f"rank {self.rank}, instruction #{self.index} ({ins['ir']})"

    def check(self, ins, t: torch.Tensor, boundary: int, what: str) -> None:
        want = self.meta.get(boundary)
        if want is None:
            raise ShapeMismatch(f"{self._where(ins)}: no metadata for boundary {boundary}")
        if tuple(t.shape) != tuple(want[0]) or t.dtype != want[1]:
            raise ShapeMismatch(
                f"{self._where(ins)}: {what} has shape {describe(t.shape, t.dtype)} but the "
                f"plan's metadata for boundary {boundary} says {describe(*want)}"
            )

    def _put(self, name: str, t: torch.Tensor) -> None:
        self.bufs[name] = t

    # ------------------------------------------------------------------ compute
    def _op_F(self, ins) -> None:
        s, m, chunk = ins["stage"], ins["mb"], ins["chunk"]
        if ins["in"] == "data":
            x = self.inputs[m]
            self.check(ins, x, 0, f"microbatch {m} of the inputs")
        else:
            x = self.bufs.pop(ins["in"]).detach()
            if x.is_floating_point():
                x.requires_grad_(True)
        y = self.modules[chunk](x)
        if not isinstance(y, torch.Tensor):
            raise ShapeMismatch(
                f"{self._where(ins)}: stage {s} returned {type(y).__name__}; "
                "a stage must return one tensor"
            )
        if ins["out"] == "loss":
            y = check_loss(self.loss_fn(y, self.targets[m]), s, m, self.rank) * self.scale
            self.loss = y.detach() if self.loss is None else self.loss + y.detach()
        else:
            self.check(ins, y, boundary_of(ins["out"]), f"the output of stage {s}")
            self._put(ins["out"], y.detach())
        self.saved[(s, m)] = (x, y)
        self.peak_saved = max(self.peak_saved, len(self.saved))

    def _grad_in(self, ins):
        return self.bufs.pop(ins["grad_in"]) if ins["grad_in"] else None

    def _send_input_grad(self, ins, x, dx) -> None:
        if not ins["grad_out"]:
            return
        if dx is None:  # the stage output does not depend on its input (or x is not float)
            dx = torch.zeros_like(x)
        self.check(ins, dx, ins["stage"], f"the input gradient of stage {ins['stage']}")
        self._put(ins["grad_out"], dx)

    def _op_B(self, ins) -> None:
        x, y = self.saved.pop((ins["stage"], ins["mb"]))
        torch.autograd.backward(y, grad_tensors=self._grad_in(ins))
        self._send_input_grad(ins, x, x.grad if x.requires_grad else None)

    def _op_I(self, ins) -> None:
        key = (ins["stage"], ins["mb"])
        x, y = self.saved[key]
        g = self._grad_in(ins)
        dx = None
        if ins["grad_out"] and x.requires_grad:
            (dx,) = torch.autograd.grad(
                y, [x], grad_outputs=g, retain_graph=True, allow_unused=True
            )
        self.weight_todo[key] = (y, g)
        self._send_input_grad(ins, x, dx)

    def _op_W(self, ins) -> None:
        key = (ins["stage"], ins["mb"])
        if key not in self.weight_todo:
            raise RuntimeError(
                f"{self._where(ins)}: W before the I of stage {key[0]}, microbatch {key[1]}"
            )
        y, g = self.weight_todo.pop(key)
        self.saved.pop(key)
        params = self._params[ins["chunk"]]
        if not params:
            return
        grads = torch.autograd.grad(y, params, grad_outputs=g, allow_unused=True)
        for p, gp in zip(params, grads):
            if gp is None:
                continue
            if p.grad is None:
                p.grad = gp
            else:
                p.grad.add_(gp)

    # ------------------------------------------------------------------ communication
    def _op_group(self, ins) -> None:
        ops, received = [], []
        for o in ins["ops"]:
            if o["op"] == "send":
                t = self.bufs.pop(o["buffer"])
                ops.append(dist.P2POp(dist.isend, t, o["peer"], self.group))
            else:
                shape, dtype = self.meta[boundary_of(o["buffer"])]
                t = torch.empty(shape, dtype=dtype, device=self.device)
                ops.append(dist.P2POp(dist.irecv, t, o["peer"], self.group))
                received.append((o["buffer"], t))
        works = dist.batch_isend_irecv(ops)
        if ins.get("deferred"):  # posted now, completed by its 'wait' instruction
            self.pending[ins["id"]] = (works, received, ops)
            return
        for work in works:
            work.wait()
        for name, t in received:
            self._put(name, t)

    def _op_wait(self, ins) -> None:
        works, received, _ops = self.pending.pop(ins["group"])
        for work in works:
            work.wait()
        for name, t in received:
            self._put(name, t)
