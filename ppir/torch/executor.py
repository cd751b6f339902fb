"""Interpret one rank's program of a ``ppir.plan/2`` plan for one training step.

Contract:

* Instructions run strictly in plan order; the executor makes no scheduling decision.  A
  ``group`` is posted with one ``dist.batch_isend_irecv`` holding its messages in plan order
  (a value of several tensors is one message per tensor, in leaf order: :mod:`.values`; each
  with the executor's ``tag``: 0 for training, :data:`.evaluation.EVALUATION_TAG` for
  evaluation) and is waited on before the next instruction (a group completes as a unit, as
  the verifier assumes).
  A ``deferred`` group (the IR's ``post[...]``) is not waited on there; its ``wait``
  instruction waits and only then hands over the received values.
* Receive buffers are allocated when their group is posted, from the boundary metadata; a value
  is dropped at its single read, and a stage's saved activations by its B (or W), so memory
  follows what the schedule keeps in flight.
* Each stage runs as its own autograd graph: its floating-point inputs are leaves requiring
  grad, and their gradients are what SEND_B carries (or hands over locally on a V fold).
* The last stage's loss is ``loss_fn(output, target) / M``: with equal microbatches the
  gradients accumulated over a step equal single-process training on the whole mini-batch.
* An evaluation plan (``forward_only``) runs its forwards under ``torch.no_grad()`` and keeps
  nothing for a backward; its step returns the loss the same way.
* B, I and W are :mod:`.backward`'s (I and W split the backward without recomputation).
* ``reduce`` posts the data-parallel reduction of a stage's gradients (:mod:`.reduce`); the
  step waits for every reduction (and syncs tied parameters) before it returns.
* A tensor whose shape or dtype disagrees with the metadata raises :class:`ShapeMismatch`
  naming rank, instruction and both shapes, before anything is posted.  A non-finite loss
  raises :class:`NonFiniteLoss` naming rank, step and microbatch (or warns).  A failed
  send/recv raises :class:`CommError` naming the peer, as does one that does not complete
  within ``timeout_s`` seconds (None: the process group's timeout).
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist

from ppir.diagnostics import count
from ppir.plan import boundary_of, is_evaluation_plan
from ppir.torch import values as V
from ppir.torch.backward import backward_full, backward_input, backward_weight
from ppir.torch.errors import NonFiniteLoss, ShapeMismatch, comm_error
from ppir.torch.model import nonfinite_loss, scalar_loss
from ppir.torch.procgroup import wait_all

Meta = dict  # boundary -> spec (see :mod:`.values`)


class _Saved:
    """What a stage's F keeps for its backward."""

    __slots__ = ("inputs", "outputs", "loss")

    def __init__(self, inputs: list, outputs: list, loss: bool):
        self.inputs, self.outputs, self.loss = inputs, outputs, loss


class Executor:
    """Runs ``plan["programs"][pp_rank]`` with ``modules[chunk]`` (the rank's stages, ascending).

    ``peer(r)`` maps a pipeline rank of the plan to the global rank used with ``group``;
    ``rank`` is this process's global rank (for messages)."""

    def __init__(
        self,
        plan: dict,
        pp_rank: int,
        modules: list,
        loss_fn,
        meta: Meta,
        device,
        *,
        rank: int | None = None,
        group=None,
        peer=None,
        reducer=None,
        nonfinite: str = "raise",
        timeout_s: float | None = None,
        tag: int = 0,
    ):
        self.program = plan["programs"][pp_rank]
        self.pp_rank = pp_rank
        self.rank = pp_rank if rank is None else rank
        self.stages = plan["stages_of_rank"][pp_rank]
        self.modules, self.loss_fn, self.meta, self.device = modules, loss_fn, meta, device
        self.group = group
        self.peer = peer or (lambda r: r)
        self.reducer = reducer
        self.nonfinite = nonfinite
        self.timeout_s = timeout_s
        self.tag = tag  # of every message (gloo matches it; NCCL ignores tags)
        self.forward_only = is_evaluation_plan(plan)
        self.microbatches = plan["microbatches"]
        self.scale = 1.0 / plan["microbatches"]
        self.peak_saved = 0  # most (stage, mb) activations held at once during the last step
        self._params = [[p for p in m.parameters() if p.requires_grad] for m in modules]
        self._messages = {  # (boundary, is a gradient) -> its tensors' (shape, dtype)
            (b, grad): V.message_specs(sp, grad) for b, sp in meta.items() for grad in (False, True)
        }

    # ------------------------------------------------------------------ one step
    def step(self, inputs: list | None, targets: list | None, step: int = 0):
        """Run the program once; returns the mini-batch loss tensor on the rank holding the last
        stage, else None.  Gradients accumulate into ``param.grad`` (zero them before)."""
        self.bufs: dict[str, object] = {}
        self.saved: dict[tuple[int, int], _Saved] = {}
        self.weight_todo: dict = {}
        self.pending: dict[int, tuple] = {}  # deferred groups posted, not yet waited on
        self.inputs, self.targets, self.step_no = inputs, targets, step
        self.losses: list[tuple[int, torch.Tensor]] = []
        self.peak_saved = 0
        if self.reducer is not None:
            self.reducer.begin()
        for i, ins in enumerate(self.program):
            self.index = i
            getattr(self, "_op_" + ins["op"])(ins)
        if self.reducer is not None:
            self.reducer.finish()
        if self.pending:
            raise RuntimeError(
                f"rank {self.rank}: {count(len(self.pending), 'deferred group')} posted "
                "but never waited on in this step"
            )
        left = [k for k in self.bufs] + [f"{s}:{m}" for s, m in self.saved]
        if left:
            raise RuntimeError(
                f"rank {self.rank}: the plan left values unused at the end of "
                f"the step: {', '.join(sorted(left))}"
            )
        if not self.losses:
            return None
        loss = torch.stack([v for _, v in self.losses]).sum()
        self._check_finite(loss)
        return loss

    def _check_finite(self, loss) -> None:
        if bool(torch.isfinite(loss)) or self.nonfinite == "ignore":
            return
        msg = nonfinite_loss(self.losses, self.rank, self.stages[-1], self._when())
        if msg is None:  # each loss is finite, their sum overflowed
            return
        if self.nonfinite == "warn":
            print(f"ppir: warning: {msg}", file=sys.stderr, flush=True)
            return
        raise NonFiniteLoss(
            msg + "; stopping (pass nonfinite='warn' or --on-nonfinite warn to go on)"
        )

    def _when(self) -> str:
        """The step (or, in an evaluation plan, the evaluation) this run of the program is."""
        return f"{'evaluation' if self.forward_only else 'step'} {self.step_no}"

    def _where(self, ins) -> str:
        """Where an error happened; a data-parallel rank also names the pipeline rank whose
        program it runs (global rank 3 runs pipeline rank 1's, say)."""
        of = f" (pipeline rank {self.pp_rank}'s program)" if self.rank != self.pp_rank else ""
        return f"rank {self.rank}{of}, instruction #{self.index} ({ins['ir']})"

    def _forward_note(self, ins) -> str:
        came = "the microbatch's inputs" if ins["in"] == "data" else "the previous stage"
        return f"{self._where(ins)}: stage {ins['stage']}'s forward, given {{}} from {came}"

    def _check(self, ins, value, boundary: int, what: str) -> None:
        want = self.meta.get(boundary)
        if want is None:
            raise ShapeMismatch(f"{self._where(ins)}: no metadata for boundary {boundary}")
        try:
            _, got = V.flatten(value, what)
        except TypeError as e:
            raise ShapeMismatch(f"{self._where(ins)}: {e}") from None
        if got != want:
            first = "evaluation" if self.forward_only else "step"
            later = (  # shapes that held at the first step changed since
                f" (at {self._when()}: a boundary's shapes are fixed for the whole run, "
                f"the plan's or those the first {first} inferred"
                + (
                    "; pad a batch of another size to the first one's, or drop it: a data "
                    "loader's smaller last batch (drop_last=True), a make_batch whose shapes "
                    "change from step to step)"
                    if boundary == 0 and not self.forward_only
                    else ")"
                )
                if self.step_no
                else " (a boundary's shapes are the same for every microbatch: the plan's, or "
                "those the first microbatch gave)"
            )
            if boundary and V.without_dtypes(got) == V.without_dtypes(want):  # autocast in one step
                later += (
                    f"; only the dtype differs: run every {first} under the same "
                    "torch.autocast (or none) as the first"
                )
            raise ShapeMismatch(
                f"{self._where(ins)}: {what} has shape {V.describe(got)} but the "
                f"plan's metadata for boundary {boundary} says {V.describe(want)}{later}"
            )

    # ------------------------------------------------------------------ compute
    def _op_F(self, ins) -> None:
        if self.forward_only:
            with torch.no_grad():
                return self._forward(ins, self._input(ins))
        return self._forward(ins, self._input(ins))

    def _input(self, ins):
        if ins["in"] == "data":
            x = self.inputs[ins["mb"]]
            self._check(ins, x, 0, f"microbatch {ins['mb']} of the inputs")
            return x
        return self.bufs.pop(ins["in"])

    def _forward(self, ins, x) -> None:
        s, m, chunk = ins["stage"], ins["mb"], ins["chunk"]
        x, grad_in = V.stage_input(x, ins["in"] != "data" and not self.forward_only)
        y = V.call_stage(self.modules[chunk], x, lambda: self._forward_note(ins))
        if ins["out"] == "loss":
            loss = scalar_loss(self._loss(ins, y), s, m, self.rank) * self.scale
            self.losses.append((m, loss.detach()))
            if not self.forward_only:
                self.saved[(s, m)] = _Saved(grad_in, [loss], True)
        else:
            self._check(ins, y, boundary_of(ins["out"]), f"the output of stage {s}")
            self.bufs[ins["out"]] = V.detached(y)
            if not self.forward_only:
                self.saved[(s, m)] = _Saved(grad_in, V.float_leaves(y), False)
        self.peak_saved = max(self.peak_saved, len(self.saved))

    def _loss(self, ins, y):
        def where():
            return (
                f"{self._where(ins)}: loss_fn(output, target) of stage {ins['stage']}, "
                f"microbatch {ins['mb']}"
            )

        return V.call_loss(self.loss_fn, y, self.targets[ins["mb"]], where)

    def _backward_args(self, ins, sv: _Saved) -> tuple[list, list]:
        return V.backward_args(sv.outputs, None if sv.loss else self.bufs.pop(ins["grad_in"]))

    def _send_input_grad(self, ins, sv: _Saved, dx: list) -> None:
        if not ins["grad_out"]:
            return
        grads = V.input_grads(sv.inputs, dx)
        b = ins["stage"]
        specs = self._messages[(b, True)]
        for g, (shape, dtype) in zip(grads, specs):
            if tuple(g.shape) != shape or g.dtype != dtype:
                raise ShapeMismatch(
                    f"{self._where(ins)}: the input gradient of stage {b} has shape "
                    f"{tuple(g.shape)} {V.dtype_name(g.dtype)}, expected {shape} "
                    f"{V.dtype_name(dtype)}"
                )
        self.bufs[ins["grad_out"]] = grads

    def _op_B(self, ins) -> None:
        sv = self.saved.pop((ins["stage"], ins["mb"]))
        outs, gs = self._backward_args(ins, sv)
        dx = self._backward(ins, "", lambda: backward_full(outs, gs, sv.inputs))
        self._send_input_grad(ins, sv, dx)

    def _op_I(self, ins) -> None:
        key = (ins["stage"], ins["mb"])
        sv = self.saved[key]
        outs, gs = self._backward_args(ins, sv)
        params = self._params[ins["chunk"]]
        dx, work = self._backward(
            ins, " (input gradient)", lambda: backward_input(outs, gs, sv.inputs, params)
        )
        self.weight_todo[key] = work
        self._send_input_grad(ins, sv, dx)

    def _op_W(self, ins) -> None:
        key = (ins["stage"], ins["mb"])
        if key not in self.weight_todo:
            raise RuntimeError(
                f"{self._where(ins)}: W before the I of stage {key[0]}, microbatch {key[1]}"
            )
        work = self.weight_todo.pop(key)
        self._backward(ins, " (weight gradients)", lambda: backward_weight(work))
        self.saved.pop(key)

    def _backward(self, ins, part: str, run):
        """``run()``; an exception from it (autograd running the user's backward code)
        propagates, its traceback whole, with a note naming the instruction."""
        try:
            return run()
        except Exception as e:
            V.note(e, lambda: f"{self._where(ins)}: stage {ins['stage']}'s backward{part}")
            raise

    def _op_reduce(self, ins) -> None:
        if self.reducer is not None:
            self.reducer.post(ins["chunk"])

    # ------------------------------------------------------------------ communication
    def _alloc(self, o) -> list:
        b = boundary_of(o["buffer"])
        return V.recv_buffers(self._messages[(b, o["kind"] == "grad")], self.device)

    def _received(self, o, tensors: list):
        return V.received(self.meta[boundary_of(o["buffer"])], o["kind"] == "grad", tensors)

    def _op_group(self, ins) -> None:
        ops, received = [], []
        for o in ins["ops"]:
            peer = self.peer(o["peer"])
            if o["op"] == "send":
                for t in V.send_tensors(self.bufs.pop(o["buffer"]), o["kind"] == "grad"):
                    ops.append(dist.P2POp(dist.isend, t, peer, self.group, self.tag))
            else:
                ts = self._alloc(o)
                ops.extend(dist.P2POp(dist.irecv, t, peer, self.group, self.tag) for t in ts)
                received.append((o, ts))
        works = self._comm(ins, lambda: dist.batch_isend_irecv(ops)) if ops else []
        if ins.get("deferred"):  # posted now, completed by its 'wait' instruction
            self.pending[ins["id"]] = (works, received, ins)
            return
        self._complete(ins, works, received)

    def _op_wait(self, ins) -> None:
        works, received, posted = self.pending.pop(ins["group"])
        self._complete(posted, works, received, at=ins)

    def _complete(self, ins, works, received, at=None) -> None:
        self._comm(at or ins, lambda: wait_all(works, self.timeout_s), ins)
        for o, ts in received:
            self.bufs[o["buffer"]] = self._received(o, ts)

    def _comm(self, ins, fn, group_ins=None):
        try:
            return fn()
        except RuntimeError as e:
            peers = sorted({self.peer(o["peer"]) for o in (group_ins or ins)["ops"]})
            raise comm_error(self._where(ins), peers, e, self.timeout_s) from None
