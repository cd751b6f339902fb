"""One rank of ``ppir profile``, step by step: :func:`measure_rank` runs 1F1B over the model's
pieces on every rank (with the default process group initialised when ``world > 1``), times
every op in place (a :class:`~ppir.profile.worker.Runner`), then F&B, the transfers, the bytes
autograd saves and the further orders (:mod:`.orders`), and returns that rank's samples; see
:mod:`ppir.profile` for what is measured.
"""

from __future__ import annotations

import time

import torch

from ppir.profile import pieces as PC
from ppir.profile.boundaries import propagate_shapes
from ppir.profile.orders import Order, order_steps, orders
from ppir.profile.pieces import build
from ppir.profile.transfer import barrier, measure_transfer
from ppir.profile.worker import Runner
from ppir.torch import values as V
from ppir.torch.model import optimizer_state_bytes


class SavedBytes:
    """Saved-tensor hooks counting the distinct tensors autograd keeps (a view counts its own
    bytes once, however often it is saved; parameters and their views are excluded)."""

    def __init__(self, params):
        self.skip = {p.data_ptr() for p in params}
        self.seen: set[tuple[int, int]] = set()

    def pack(self, t):
        key = (t.data_ptr(), t.numel() * t.element_size())
        if key[0] not in self.skip and key[1]:
            self.seen.add(key)
        return t

    @staticmethod
    def unpack(t):
        return t

    @property
    def total(self) -> int:
        return sum(n for _, n in self.seen)


class Profiler:
    """The measurement of one rank, step by step (``ppir profile`` runs :func:`measure_rank`;
    a bench may interleave :meth:`step` with other work to share the machine's load)."""

    def __init__(
        self, rank, world, pieces, model, program, schedule, M, device, batch=None, timeout_s=None
    ):
        self.run = Runner(rank, world, pieces, model.loss_fn, program, schedule, M, device)
        self.run.timeout_s = timeout_s
        self.model = model
        if batch is None:
            from ppir.profile.launch import check_batch

            batch = model.make_batch(0)
            check_batch(batch, M)
        self.inputs = [V.to_device(x, device) for x in V.split_batch(batch[0], M, "inputs")]
        self.targets = [V.to_device(t, device) for t in V.split_batch(batch[1], M, "targets")]
        propagate_shapes(self.run, self.inputs[0], device)
        if world > 1:
            measure_transfer(self.run, 1)  # connects every pair before anything is timed
        self.params = [p for ps in self.run.params for p in ps]
        self.counted = False

    def step(self, split: bool | str, record: bool = True) -> None:
        """One 1F1B step: full backwards, or (``split``) I then W, or (``split="late"``) I then
        the previous microbatch's W (``W_late``); the first recorded step also counts the saved
        bytes of one microbatch."""
        run = self.run
        hooks = None
        if record and not self.counted:
            hooks = [SavedBytes(self.params) for _ in run.pieces]
        run.step(self.inputs, self.targets, split=split, record=record, hooks=hooks)
        if hooks:
            for s, h in zip(run.samples, hooks):
                s.activation_bytes = h.total
            self.counted = True

    def finish(self, reps: int):
        """F&B and the isolated boundary timings; -> (samples per piece, one-way seconds per
        boundary in isolation, this rank's recorded groups)."""
        from ppir.profile.fb import measure_fb

        measure_fb(self.run, self.inputs, self.targets, max(3, reps))
        transfer = measure_transfer(self.run, max(5, reps)) if self.run.world > 1 else []
        for s, ps in zip(self.run.samples, self.run.params):
            s.optimizer_bytes = optimizer_state_bytes(self.model, ps, why := [])
            s.optimizer_error = "".join(why)
        shared = PC.shared_bytes(self.model, self.run.pieces, self.run.first)
        for s, mine in zip(self.run.samples, shared):
            s.shared = mine
        return self.run.samples, transfer, self.run.groups


STEP_KINDS = (False, True, "late")
"""The profile's timed steps in turn: full backwards, split with W right after its I, split with
W after the next microbatch's F and I (so W_late needs 3 steps)."""


def measure_rank(
    rank,
    world,
    pieces,
    model,
    program,
    schedule,
    M,
    steps,
    warmup,
    device,
    batch=None,
    timeout_s=None,
    on_step=None,
    further=True,
):
    """The rank's samples (a list of :class:`Samples`, one per piece), boundary times, groups,
    samples in the further orders (:mod:`.orders`, run after the timed steps) and each timed
    1F1B step's ``(kind, wall seconds, processor seconds)`` (kind: a :data:`STEP_KINDS` entry;
    from the barrier before it to the barrier after it, what the slowest rank took; the
    processor time of this rank's process, all its threads, over that span); ``batch``:
    ``make_batch(0)`` when the caller made it (else it is made here); ``timeout_s``: the
    process group's timeout, named in the error of a peer that does not answer;
    ``on_step(n)``: called after each step (``ProfileSpec.total_steps``) with the steps done;
    ``further``: run the further orders (after F&B, the transfers and the optimizer's bytes,
    with 1F1B's pieces moved off a GPU)."""
    prof = Profiler(rank, world, pieces, model, program, schedule, M, device, batch, timeout_s)
    done = 0

    def after(step: int, what: str = "profile step") -> float:  # when every rank had ended it
        nonlocal done
        if world > 1:
            barrier(prof.run, f"rank {rank}: after {what} {step}")
        end = time.perf_counter()
        done += 1
        if on_step is not None:
            on_step(done)
        return end

    walls = []
    for i in range(warmup + steps):
        kind = STEP_KINDS[(i - warmup) % 3]
        begin, cpu = time.perf_counter(), time.process_time()  # all left the last barrier
        prof.step(split=kind, record=i >= warmup)
        end = after(i)
        if i >= warmup:
            walls.append((kind, end - begin, time.process_time() - cpu))
    samples, transfer, groups = prof.finish(steps)  # all measured with 1F1B's pieces: their
    if device.type == "cuda":  # memory goes to the orders' own copies from here on
        for m in pieces:
            m.to("cpu")
        torch.cuda.empty_cache()
    positions = []  # the further orders, one at a time (their pieces are freed in between)
    for name in orders(world, world * len(pieces), M) if further else ():
        order = Order(prof, lambda j: build(model, j, world * len(pieces), device), name)
        for i in range(1 + order_steps(steps)):  # one step untimed
            order.step(prof, i, record=i > 0)
            after(i, f"{name} order step")
        positions += order.positions()
        del order
    return samples, transfer, groups, positions, walls
