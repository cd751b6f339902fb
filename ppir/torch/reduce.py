"""Gradient reduction: across data-parallel replicas per stage, and across the pipeline ranks
that hold copies of one tied parameter.

Contract of :class:`GradReducer`:

* Each parameter of the rank belongs to exactly one *bucket*: that of the stage, among the
  rank's stages holding it, whose ``reduce`` instruction comes last in the program (a parameter
  shared by two stages of one rank is complete only after both).
* :meth:`post` (the plan's ``reduce`` instruction) flattens the bucket's gradients (zeros where
  a parameter got none, so every replica reduces the same sizes) and one flag per parameter
  (whether it got a gradient), divides by the number of replicas and starts an asynchronous
  all-reduce (sum) over the data-parallel group: after it, every replica holds the mean
  gradient, which is what single-process training on the global batch gives.  A parameter that
  got no gradient on any replica (unused in this step's forwards) keeps ``grad`` None, as on
  one process, so an optimizer skips it (AdamW neither decays it nor moves its moments).
  Every replica runs the same program, so the collectives of one DP group are issued in the
  same order everywhere, and they use a communicator of their own, apart from the
  pipeline's.
* :meth:`begin` (at the start of a step, before any backward) sets aside the gradients that
  tied copies carry from earlier steps (gradient accumulation), so that each holder's
  gradient covers this step only.
* :meth:`finish` waits for every posted reduction, copies the results back into ``p.grad``,
  then makes tied copies identical: the holders of a tied parameter exchange this step's
  gradients (point-to-point in the pipeline group, one batch) and each sets its copy's
  gradient to what it carried before the step plus the sum in holder order (bitwise equal on
  every holder), as Megatron's embedding group does with an all-reduce.  A step that fails
  between the two leaves the tied gradients undefined.
* ``sync`` (True by default; ``PipelineRuntime.no_sync`` clears it, as DDP's ``no_sync``
  does): while it is False, :meth:`post` reduces nothing and :meth:`finish` neither waits
  nor sums tied copies, so the gradients of those steps stay this replica's and this
  holder's own.  At a window's first step :meth:`begin` sets nothing aside: what the tied
  copies carried (equal on every holder) stays in one copy, the lowest holder's first, and
  the others' gradients are dropped, so the window's sum counts it once and a
  ``zero_grad()`` inside the window clears it with every other gradient (as DDP's does).
  The first step with ``sync`` True then reduces everything accumulated since the last
  synchronised step (a reduction of ``p.grad``, whole) and sums the tied copies: the
  gradients equal those of reducing every step, with one reduction instead of k.
* :meth:`sync_start` makes replicas and tied copies start from identical values: parameters
  (and, with ``broadcast_buffers``, the modules' buffers) are broadcast from data-parallel rank
  0, and each tied parameter from its first holder.
* :meth:`sync_buffers` (before each step, with ``broadcast_buffers``) broadcasts the modules'
  buffers (BatchNorm's running statistics, counters) from data-parallel rank 0, one coalesced
  broadcast per dtype, as DDP's ``broadcast_buffers=True`` does before each forward: each
  step starts from replica 0's buffers, and during the step each replica updates them with
  its own data.
* Every wait is bounded by ``timeout_s`` (None: the process group's timeout); one that runs
  out raises :class:`~ppir.torch.errors.CommError`.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from ppir.torch.errors import SetupError, comm_error
from ppir.torch.procgroup import wait_all
from ppir.torch.tied import TiedCopy


class GradReducer:
    def __init__(
        self,
        modules: list,
        program: list,
        *,
        dp_group=None,
        dp_size: int = 1,
        dp_src: int = 0,
        pp_group=None,
        tied: list[TiedCopy] = (),
        rank: int = 0,
        timeout_s: float | None = None,
        broadcast_buffers: bool = True,
    ):
        self.dp_group, self.dp_size, self.dp_src = dp_group, dp_size, dp_src
        # each buffer once, in module order (a module may serve two stages)
        every = {id(b): b for m in modules for b in m.buffers()} if broadcast_buffers else {}
        self.buffers = list(every.values())
        self.pp_group, self.tied, self.rank, self.timeout_s = pp_group, list(tied), rank, timeout_s
        order = [ins["chunk"] for ins in program if ins["op"] == "reduce"]
        last = {c: i for i, c in enumerate(order)}
        best: dict[int, tuple] = {}  # id(param) -> (position of its last reduce, chunk, param)
        for c, m in enumerate(modules):
            for p in m.parameters():
                pos = last.get(c, -1)
                if p.requires_grad and (id(p) not in best or pos >= best[id(p)][0]):
                    best[id(p)] = (pos, c, p)
        self.buckets: dict[int, list] = {c: [] for c in range(len(modules))}
        for _, c, p in best.values():
            self.buckets[c].append(p)
        self.pending: list = []
        self.carried: list[list] = [[None] * len(t.local) for t in self.tied]
        self.sync = True
        self._unsynced = False  # a step ran with sync False since the last synchronised one

    @property
    def unsynced(self) -> bool:
        """A step ran inside ``no_sync`` since the last synchronised step: the gradients are
        this replica's local sums, not yet reduced over replicas nor summed over tied copies."""
        return self._unsynced

    def begin(self) -> None:
        """Set aside the tied copies' gradients from earlier steps (see the module doc)."""
        if self._unsynced:  # what they carry is this window's own: it is summed at its end
            return
        if not self.sync:  # a window's first step: one copy keeps what they carry (equal)
            for t in self.tied:
                for p in t.redundant(self.rank):
                    p.grad = None
            self.carried = [[None] * len(t.local) for t in self.tied]  # a failed step's too
            return
        self.carried = [[p.grad for p in t.local] for t in self.tied]
        for t in self.tied:
            for p in t.local:
                p.grad = None

    # -------------------------------------------------------------- data parallel
    def post(self, chunk: int) -> None:
        params = self.buckets.get(chunk, [])
        if self.dp_size == 1 or not params or not self.sync:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        got = torch.tensor([float(p.grad is not None) for p in params], dtype=grads[0].dtype)
        flat = _flatten_dense_tensors([*grads, got.to(grads[0].device)]).div_(self.dp_size)
        try:
            work = dist.all_reduce(flat, group=self.dp_group, async_op=True)
        except RuntimeError as e:
            raise comm_error(
                f"rank {self.rank}: reducing stage gradients", (), e, self.timeout_s
            ) from None
        self.pending.append((params, flat, work))

    def finish(self) -> None:
        self._unsynced = not self.sync
        if not self.sync:
            return
        pending, self.pending = self.pending, []
        for params, flat, work in pending:
            try:
                wait_all([work], self.timeout_s)
            except RuntimeError as e:
                raise comm_error(
                    f"rank {self.rank}: data-parallel gradient reduction", (), e, self.timeout_s
                ) from None
            *values, got = _unflatten_dense_tensors(flat, [*params, flat[: len(params)]])
            # read the flags (a device sync) only when some parameter here got no gradient
            some_got = got.tolist() if any(p.grad is None for p in params) else [1] * len(params)
            for p, g, some in zip(params, values, some_got):
                if p.grad is None and some == 0:  # no replica's forwards used it
                    continue
                if p.grad is None:
                    p.grad = g
                else:
                    p.grad.copy_(g)
        if self.tied:
            self._sum_tied()

    # -------------------------------------------------------------- tied parameters
    def _sum_tied(self) -> None:
        """Each tied copy's gradient := what it carried before the step + this step's sum."""
        ops, parts = [], []
        for t in self.tied:
            mine = [p.grad if p.grad is not None else torch.zeros_like(p) for p in t.local]
            own = mine[0] if len(mine) == 1 else torch.stack(mine).sum(0)
            recv = {r: torch.empty_like(own) for r in t.others}
            for r in t.others:
                ops.append(dist.P2POp(dist.isend, own.contiguous(), r, self.pp_group))
                ops.append(dist.P2POp(dist.irecv, recv[r], r, self.pp_group))
            parts.append((t, own, recv))
        self._run(ops, "summing tied parameter gradients")
        carried, self.carried = self.carried, [[None] * len(t.local) for t in self.tied]
        for (t, own, recv), before in zip(parts, carried):
            total = None
            for r in sorted([self.rank, *t.others]):  # the same order on every holder
                part = own if r == self.rank else recv[r]
                total = part.clone() if total is None else total.add_(part)
            for p, old in zip(t.local, before):
                g = total if len(t.local) == 1 else total.clone()
                p.grad = g if old is None else old.add_(g)  # equal on every holder before

    @torch.no_grad()
    def tied_drift(self) -> float:
        """Largest difference between this rank's copy of a tied parameter and any other
        holder's (collective among the holders; 0.0 when the copies are identical)."""
        ops, parts = [], []
        for t in self.tied:
            own = t.local[0].detach()
            recv = {r: torch.empty_like(own) for r in t.others}
            for r in t.others:
                ops.append(dist.P2POp(dist.isend, own.contiguous(), r, self.pp_group))
                ops.append(dist.P2POp(dist.irecv, recv[r], r, self.pp_group))
            parts.append((t, own, recv))
        self._run(ops, "comparing tied parameters")
        worst = 0.0
        for t, own, recv in parts:
            for other in [*recv.values(), *t.local[1:]]:
                worst = max(worst, (own - other).abs().max().item())
        return worst

    def _run(self, ops: list, what: str) -> None:
        if not ops:
            return
        peers = sorted({op.peer for op in ops})
        try:
            wait_all(dist.batch_isend_irecv(ops), self.timeout_s)
        except RuntimeError as e:
            raise comm_error(f"rank {self.rank}: {what}", peers, e, self.timeout_s) from None

    # -------------------------------------------------------------- start-up
    @torch.no_grad()
    def sync_buffers(self) -> None:
        """Every replica's buffers := data-parallel rank 0's (see the module doc)."""
        if self.dp_size == 1 or not self.buffers:
            return
        by_kind: dict[tuple, list] = {}
        for b in self.buffers:
            by_kind.setdefault((b.dtype, b.device), []).append(b)
        posted, where = [], f"rank {self.rank}: broadcasting buffers from data-parallel rank 0"
        try:
            for bufs in by_kind.values():
                flat = _flatten_dense_tensors(bufs)
                work = dist.broadcast(flat, src=self.dp_src, group=self.dp_group, async_op=True)
                posted.append((bufs, flat, work))
            wait_all([work for _, _, work in posted], self.timeout_s)
        except RuntimeError as e:
            raise comm_error(where, (), e, self.timeout_s) from None
        for bufs, flat, _ in posted:
            for b, v in zip(bufs, _unflatten_dense_tensors(flat, bufs)):
                b.copy_(v)

    @torch.no_grad()
    def check_replicas(self, device) -> None:
        """Every replica holds the same parameters (at the first step).  Construction gave them
        replica 0's; a checkpoint loaded after it by replica 0 alone (as before a DDP wrap)
        leaves the replicas apart, and averaged gradients keep them apart without an error."""
        params = [p for ps in self.buckets.values() for p in ps]
        if self.dp_size == 1 or not params:
            return
        fp = torch.zeros(2, dtype=torch.float64, device=device)
        for p in params:  # one parameter at a time: no float64 copy of them all at once
            x = p.detach()
            fp[0] += x.sum(dtype=torch.float64).to(device)
            fp[1] += torch.linalg.vector_norm(x, dtype=torch.float64).to(device) ** 2
        # non-finite sums (a diverged run, the same on every replica) compare equal
        fp = torch.nan_to_num(fp, nan=1.5e308, posinf=1.6e308, neginf=-1.6e308)
        t = torch.cat([fp, -fp])  # a max of both: the largest and the smallest
        try:
            work = dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.dp_group, async_op=True)
            wait_all([work], self.timeout_s)
        except RuntimeError as e:
            where = f"rank {self.rank}: comparing the replicas' parameters"
            raise comm_error(where, (), e, self.timeout_s) from None
        if not torch.allclose(t[:2], -t[2:], rtol=1e-10, atol=0.0):
            raise SetupError(
                f"rank {self.rank}: the data-parallel replicas hold different parameters at the "
                "first step: the runtime gave every replica replica 0's when it was built, and "
                "they changed on some replicas since (a checkpoint loaded by replica 0 alone?); "
                "load it before building the runtime, or on every replica"
            )

    def sync_start(self) -> None:
        """Identical starting values on every replica and every holder of a tied parameter."""
        self.sync_buffers()
        if self.dp_size > 1:
            for params in self.buckets.values():
                for p in params:
                    try:
                        work = dist.broadcast(
                            p.data, src=self.dp_src, group=self.dp_group, async_op=True
                        )
                        wait_all([work], self.timeout_s)
                    except RuntimeError as e:
                        raise comm_error(
                            f"rank {self.rank}: broadcasting start values", (), e, self.timeout_s
                        ) from None
        ops, copies = [], []
        for t in self.tied:
            first = min([self.rank, *t.others])
            if first == self.rank:
                ops += [dist.P2POp(dist.isend, t.local[0].data, r, self.pp_group) for r in t.others]
            else:
                buf = torch.empty_like(t.local[0].data)
                ops.append(dist.P2POp(dist.irecv, buf, first, self.pp_group))
                copies.append((t, buf))
            for p in t.local[1:]:
                p.data.copy_(t.local[0].data)
        self._run(ops, "making tied parameters identical")
        for t, buf in copies:
            for p in t.local:
                p.data.copy_(buf)
