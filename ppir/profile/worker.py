"""One rank of ``ppir profile`` at work: a :class:`Runner` runs a lowered program (1F1B, or a
further order) over the rank's pieces and times every op in place.

:func:`ppir.profile.measure.measure_rank` drives it on every rank.  The order and its message
groups come from ppir's own built-ins lowered by lower-comms (the compiler's semantics; nothing
is re-derived here).
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from ppir.ir import Action, Group, OpKind, Wait, deps
from ppir.profile.errors import check_loss, comm
from ppir.profile.orders import rank_pieces
from ppir.profile.samples import Samples, position
from ppir.torch import values as V
from ppir.torch.backward import backward_full, backward_input, backward_weight
from ppir.torch.model import scalar_loss
from ppir.torch.procgroup import wait_all


class Runner:
    """The rank's pieces and its lowered 1F1B program, with timers around every op."""

    timeout_s: float | None = None  # the process group's timeout, named in a CommError

    def __init__(
        self, rank, world, pieces, loss_fn, program, schedule, M, device, cuts=None, main=True
    ):
        self.rank, self.world, self.pieces = rank, world, pieces
        self.loss_fn, self.program, self.schedule = loss_fn, program, schedule
        self.M, self.device, self.steps = M, device, 0  # steps run
        # cuts: the first piece (build_stage index) of each of the schedule's stages, then the
        # piece count (default: k pieces per stage); the rank's pieces are its stages' in turn
        k, S = len(pieces), schedule.stages
        self.cuts = cuts or [s * k for s in range(S + 1)]
        self.n = self.cuts[-1]  # the model's pieces
        held = rank_pieces(schedule.placement, self.cuts, rank)
        self.index = [g for js in held.values() for g in js]  # piece j's build_stage index
        self.of_stage = {s: [self.index.index(g) for g in js] for s, js in held.items()}
        self.first = self.index[0]
        self.main = main  # also time F, B, I and W whatever their position (Samples)
        self.params = [[p for p in m.parameters() if p.requires_grad] for m in pieces]
        self.samples = [Samples() for _ in pieces]
        for s, ps, m in zip(self.samples, self.params, pieces):
            s.param_bytes = sum(p.numel() * p.element_size() for p in ps)
            frozen = [p for p in m.parameters() if not p.requires_grad] + list(m.buffers())
            s.frozen_bytes = sum(t.numel() * t.element_size() for t in frozen)
        self.meta: dict = {}  # stage boundary b (the input of stage b) -> value spec
        self.groups: list = []  # per group: (post began, wait began, completed,
        # [(buffer, is_recv)], post returned, processor seconds the post took)
        self.sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    # ------------------------------------------------------------------ helpers
    def _timed(self, fn):
        self.sync()
        t0, cpu = time.perf_counter(), time.thread_time()
        out = fn()
        self.sync()
        self.cpu = time.thread_time() - cpu  # the op's processor time (on this thread)
        return out, time.perf_counter() - t0

    def _backward(self, j: int, part: str, fn):
        """``self._timed(fn)`` of piece ``j``'s backward (or ``part`` of it); an exception from
        it (autograd running the user's backward code) propagates, its traceback whole, with a
        note naming the piece, as the runtime's does."""
        try:
            return self._timed(fn)
        except Exception as e:
            where = f"ppir profile, rank {self.rank}, step {self.steps}: stage {self.index[j]}'s"
            V.note(e, lambda: f"{where} backward{part}")
            raise

    def _keep(self, j: int, kind: str, dt: float, i: int = 0, n: int = 1) -> None:
        """Record the op just timed: ``dt`` seconds of piece ``j``'s ``kind``, the ``i``-th of
        its stage's ``n`` pieces, by where its input came from (:func:`.samples.position`,
        with its processor time, in every order), and in the main order also by kind (with its
        processor time: :func:`.samples.processor_share`)."""
        s = self.samples[j]
        where = position(kind, i, n)
        if where:
            getattr(s, f"{kind}_{where}").append(dt)
            setattr(s, f"{where}_cpu", getattr(s, f"{where}_cpu") + self.cpu)
            setattr(s, f"{where}_wall", getattr(s, f"{where}_wall") + dt)
        if self.main:
            getattr(s, kind).append(dt)
            s.cpu, s.wall = s.cpu + self.cpu, s.wall + dt

    def forward_piece(self, j: int, x, target, mb: int):
        """Piece ``j`` on ``x`` (of microbatch ``mb``) as the runtime runs a stage: -> (its
        output, the input leaves that require grad, the outputs its backward starts from,
        whether they are the loss, which the runtime's check of the loss has passed)."""
        xj, grad_in = V.stage_input(x, self.index[j] > 0)  # the data needs no grad
        stage = self.index[j]

        def note():
            return f"ppir profile, rank {self.rank}: stage {stage}'s forward, given {{}}"

        y = V.call_stage(self.pieces[j], xj, note)
        if stage == self.n - 1:
            at = f"ppir profile, rank {self.rank}: loss_fn(output, target) of stage {stage}"
            value = V.call_loss(self.loss_fn, y, target, lambda: f"{at}, microbatch {mb}")
            loss = scalar_loss(value, stage, mb, self.rank)
            return y, grad_in, [loss / self.M], True
        return y, grad_in, V.float_leaves(y), False

    def chain_forward(self, x, target, mb: int, record: bool, hooks=None, js=None):
        """Run the pieces ``js`` (default: all) on ``x`` (microbatch ``mb``); returns per piece
        (its index, input leaves that require grad, outputs for backward, is the loss), and the
        last piece's output."""
        saved = []
        js = range(len(self.pieces)) if js is None else js
        for i, j in enumerate(js):

            def run(j=j, x=x):
                return self.forward_piece(j, x, target, mb)

            if hooks is not None:
                with torch.autograd.graph.saved_tensors_hooks(hooks[j].pack, hooks[j].unpack):
                    out, dt = self._timed(run)
            else:
                out, dt = self._timed(run)
            if record:
                self._keep(j, "F", dt, i, len(js))
            x, grad_in, outs, is_loss = out
            if is_loss:  # a NaN or infinite loss stops the profile, outside the timed forward
                check_loss(outs[0], self.rank, self.index[j], mb, self.steps)
            saved.append((j, grad_in, outs, is_loss))
        return saved, x

    def chain_backward(self, saved, g, split: bool, record: bool):
        """Backward through the pieces in reverse (B, or I then W per piece); returns the
        gradient of the rank's input (one tensor per leaf that requires grad)."""
        n = len(saved)
        for i in range(n - 1, -1, -1):
            j, grad_in, outs, is_loss = saved[i]
            ys, gs = V.backward_args(outs, None if is_loss else g)
            if not split:

                def full(ys=ys, gs=gs, grad_in=grad_in):
                    return backward_full(ys, gs, grad_in)

                dx, dt = self._backward(j, "", full)
                if record:
                    self._keep(j, "B", dt, i, n)
                g = V.input_grads(grad_in, dx)
                continue

            # the runtime's own split (ppir.torch.backward): I keeps for W what W needs, and W
            # runs only the weight half of each weight node
            def inp(ys=ys, gs=gs, grad_in=grad_in, ps=self.params[j]):
                return backward_input(ys, gs, grad_in, ps)

            (dx, work), ti = self._backward(j, " (input gradient)", inp)
            if record:  # before W's timing replaces self.cpu
                self._keep(j, "I", ti, i, n)
            if split == "late":  # W after the next microbatch's F and I (ZB-H1's last stage)
                self.late.append((j, work))
            else:
                _, tw = self._backward(
                    j, " (weight gradients)", lambda work=work: backward_weight(work)
                )
                if record:
                    self._keep(j, "W", tw)
            del work
            g = V.input_grads(grad_in, dx)
        return g

    def run_late(self, record: bool, keep: int = 0) -> None:
        """The deferred W of all but the last ``keep`` pieces' works, timed as ``W_late``."""
        while len(self.late) > keep:
            j, work = self.late.pop(0)
            _, tw = self._backward(
                j, " (weight gradients)", lambda work=work: backward_weight(work)
            )
            if record:
                self._keep(j, "W_late", tw)

    # ------------------------------------------------------------------ one step
    def step(self, inputs, targets, split: bool, record: bool, hooks=None) -> None:
        bufs: dict = {}
        saved: dict = {}
        self.pending: dict = {}
        self.late: list = []
        for item in self.program:
            if isinstance(item, Action) and item.kind.is_compute:
                self._compute(item, inputs, targets, bufs, saved, split, record, hooks)
                hooks = None  # the saved bytes of one microbatch are enough
            elif isinstance(item, Wait):
                self._wait(item, self.pending.pop(item.actions), bufs, record)
            else:
                posted = self._post(item, bufs)
                if isinstance(item, Group) and item.deferred:
                    self.pending[item.actions] = posted
                else:
                    self._wait(item, posted, bufs, record)
        self.run_late(False)  # the last W follows its own I and the previous W: not timed
        for m in self.pieces:
            m.zero_grad(set_to_none=True)
        self.steps += 1

    def _compute(self, a, inputs, targets, bufs, saved, split, record, hooks):
        """Run compute op ``a``; the values it reads and writes are named by the messages
        :mod:`ppir.ir.deps` says it consumes and produces."""
        S, m = self.schedule.stages, a.mb
        got, out = deps.message_in(a, S), deps.message_out(a, S)
        if a.kind is OpKind.F:
            x = inputs[m] if got is None else bufs.pop(got.buffer)
            js = self.of_stage[a.stage]
            saved[a.stage, m], y = self.chain_forward(x, targets[m], m, record, hooks, js)
            if out is not None:
                bufs[out.buffer] = V.detached(y)
        elif a.kind is OpKind.B:
            g = bufs.pop(got.buffer) if got is not None else None
            dx = self.chain_backward(saved.pop((a.stage, m)), g, split, record)
            if split == "late":  # the previous microbatch's W, now that this one's I ran
                self.run_late(record, keep=len(self.of_stage[a.stage]))
            if out is not None:
                bufs[out.buffer] = dx
        else:
            raise RuntimeError(f"ppir profile runs F and B; unexpected {a}")

    def _comm(self, item, fn, *args):
        """``fn(*args)``, posting or completing ``item``'s messages; a peer that does not answer
        in time, or went away, is a CommError naming it (:func:`~.errors.comm`)."""
        peers = sorted({deps.peer_rank(self.schedule.placement, a) for a in _actions(item)})
        where = f"rank {self.rank}, profile step {self.steps} ({item})"
        return comm(where, peers, fn, *args, timeout_s=self.timeout_s)

    def _post(self, item, bufs):
        """Post one group (``batch_isend_irecv`` in program order, a message one op per
        tensor, as the runtime posts it): its works and receives."""
        t_post, cpu = time.perf_counter(), time.thread_time()
        ops, received, names = [], [], []
        for a in _actions(item):
            msg = deps.message_of(a)
            peer = deps.peer_rank(self.schedule.placement, a)
            if a.kind.is_send:
                for t in V.send_tensors(bufs.pop(msg.buffer), msg.grad):
                    ops.append(dist.P2POp(dist.isend, t, peer))
            else:
                specs = V.message_specs(self.meta[msg.boundary], msg.grad)
                ts = V.recv_buffers(specs, self.device)
                ops.extend(dist.P2POp(dist.irecv, t, peer) for t in ts)
                received.append((msg, ts))
            names.append((msg.buffer, a.kind.is_recv))
        # a gradient message of a boundary without floating-point tensors carries none: a
        # group of only such is no call (torch refuses an empty list), as in the runtime
        works = self._comm(item, dist.batch_isend_irecv, ops) if ops else []
        posted = (time.perf_counter(), time.thread_time() - cpu)
        return t_post, posted, works, received, names

    def _wait(self, item, posted, bufs, record: bool) -> None:
        t_post, (t_posted, cpu), works, received, names = posted
        t_wait = time.perf_counter()
        self._comm(item, wait_all, works, None)  # the group's timeout: waits as timed before
        if record:  # perf_counter is one clock for every process of the machine
            self.groups.append((t_post, t_wait, time.perf_counter(), names, t_posted, cpu))
        for msg, ts in received:
            bufs[msg.buffer] = V.received(self.meta[msg.boundary], msg.grad, ts)


def _actions(item) -> tuple:
    """The communication actions of a program item: a group's or a wait's, or the action."""
    return item.actions if isinstance(item, (Group, Wait)) else (item,)
