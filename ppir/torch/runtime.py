"""``PipelineRuntime``: run a verified ppir program inside your own training loop.

::

    from ppir.torch import PipelineRuntime

    rt = PipelineRuntime(plan, stages=my_stages, loss_fn=loss_fn, mesh=mesh)
    for x, y in loader:                      # this replica's batch
        opt.zero_grad()
        loss = rt.step(x if rt.has_first_stage else None, y if rt.has_last_stage else None)
        opt.step()

You keep model construction, the optimizer, the data and the loop; the runtime interprets this
rank's program of the plan (:class:`.executor.Executor`).  Contract:

* ``program`` is a ``ppir.plan/2`` plan (a dict or a file path), a lowered
  :class:`ppir.ir.Schedule`, or a compiled object with a ``.program`` attribute; it is validated
  completely (:func:`ppir.plan.validate_plan`) before anything is posted.
* ``stages`` are this rank's stage modules, a list (or ``nn.ModuleList``) in ascending stage
  order (``runtime.stage_ids``); one module alone is refused, and so are
  :func:`~ppir.torch.split_layers` stages in another order or of another split.  The runtime
  never moves or copies them.
* Groups: ``mesh`` (a ``torch.distributed.DeviceMesh`` with dimensions ``"pp"`` and ``"dp"``,
  or :class:`ppir.torch.procgroup.Mesh`), or ``pp_group``/``dp_group``; by default the whole
  world is the pipeline.  The plan's ranks are the pipeline group's ranks.  Without a process
  group, a one-rank plan runs in this process.
* Construction is collective over the pipeline and data-parallel groups: every rank checks
  that all run the same plan (digest), warms up its links, broadcasts parameters from
  data-parallel rank 0 and makes tied copies identical.  The first :meth:`step` is collective
  over the pipeline group too: it infers the boundary metadata, unless the plan's ``meta`` or
  ``meta=`` gives it.
* :meth:`step` runs one step on this replica's batch, cut into M equal microbatches along dim 0
  (a tensor, or a tuple/list/dict of tensors; ``inputs`` matter on the rank holding stage 0,
  ``targets`` on the one holding the last stage); :meth:`step_microbatches` takes the M
  microbatches as lists.  Gradients accumulate into ``param.grad``; when it returns, they are
  averaged over the data-parallel replicas and summed over tied copies, ready for the optimizer
  (:meth:`clip_grad_norm_` clips them to a global norm, each parameter counted once).
  Steps inside ``with rt.no_sync():`` keep them local (gradient accumulation with one
  reduction: the first step after the block reduces them all).
  It returns the mini-batch loss on the rank holding the last stage (this replica's), else None.
  A step trains: under ``torch.no_grad()`` it raises :class:`RuntimeFailure` before anything
  is posted.  :meth:`evaluate` is the forward-only pass (:mod:`ppir.torch.evaluation`).
* ``shared`` declares parameters held by several stages (tied embedding and head): a list of
  ``{"name": ..., "holders": [[stage, parameter name in that stage], ...]}`` as
  :func:`ppir.torch.split_layers` finds them (and attaches to the stages, where the runtime
  also looks).  Their gradients are summed across the ranks holding them, so the copies stay
  identical.  ``shared="refuse"`` refuses to run such a model instead, naming the parameter.
* ``broadcast_buffers`` (default True, as DDP's): each step starts with the modules' buffers
  (BatchNorm's running statistics) broadcast from data-parallel rank 0, so replicas do not
  drift apart; False leaves each replica's own (:mod:`ppir.torch.reduce`).
* ``nonfinite``: ``"raise"`` (default) stops on a NaN/inf loss with :class:`NonFiniteLoss`
  naming rank, step and microbatch; ``"warn"`` prints it and goes on.
* ``timeout_s`` bounds every wait of the runtime (construction, each message, reduction and
  shape exchange): a peer that does not answer within it raises :class:`CommError` naming the
  peer and the instruction.  None (default): the process group's own timeout (what
  ``init_process_group(timeout=...)`` or :func:`ppir.torch.init` set; torch's default is 30
  minutes for gloo).
"""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist

from ppir.diagnostics import count
from ppir.plan import PlanError, build_plan, is_evaluation_plan, load_plan, validate_plan
from ppir.torch import values as V
from ppir.torch.errors import RuntimeFailure, SetupError, comm_error
from ppir.torch.evaluation import EVALUATION_TAG
from ppir.torch.executor import Executor
from ppir.torch.procgroup import Mesh, check_timeout, plan_pairs, wait_all, warm_up
from ppir.torch.reduce import GradReducer
from ppir.torch.shapes import infer_meta, meta_from_json
from ppir.torch.signatures import check_loss_fn
from ppir.torch.split import check_stage_order
from ppir.torch.tied import TiedCopy, tied_copies


def as_plan(program, verify: bool = True) -> dict:
    """A validated plan (:func:`ppir.plan.validate_plan`, verified unless ``verify`` is False)
    from a plan dict, a plan file, a lowered Schedule or a compiled object (``.program``): a
    compile that failed (a deadlock) is refused here, not run."""
    from ppir.ir import Schedule

    if hasattr(program, "program") and not isinstance(program, dict):
        program = program.program
    if isinstance(program, Schedule):
        program = build_plan(program)
    if isinstance(program, dict):
        validate_plan(program, verify=verify)
        return program
    if isinstance(program, str) or hasattr(program, "__fspath__"):
        return load_plan(program, verify=verify)
    raise TypeError(
        f"expected a plan, a plan file, a Schedule or a compiled program, got {program!r}"
    )


def _groups(mesh, pp_group, dp_group) -> tuple:
    if isinstance(mesh, Mesh):
        return mesh.pp_group, mesh.dp_group
    if mesh is not None:
        names = mesh.mesh_dim_names or ()
        if "pp" not in names:
            raise SetupError(f"the device mesh has no 'pp' dimension (dimensions {names})")
        return mesh.get_group("pp"), (mesh.get_group("dp") if "dp" in names else None)
    return pp_group, dp_group


class PipelineRuntime:
    """One rank of a pipelined (and data-parallel) training run (see the module docstring)."""

    def __init__(
        self,
        program,
        stages: list,
        loss_fn,
        *,
        mesh=None,
        pp_group=None,
        dp_group=None,
        device=None,
        shared=None,
        nonfinite: str = "raise",
        broadcast_buffers: bool = True,
        meta: dict | None = None,
        verify: bool = True,
        timeout_s: float | None = None,
    ):
        if nonfinite not in ("raise", "warn"):
            raise ValueError(f"nonfinite must be 'raise' or 'warn', got {nonfinite!r}")
        self.plan = plan = as_plan(program, verify)
        self.pp_group, self.dp_group = _groups(mesh, pp_group, dp_group)
        self.distributed = dist.is_available() and dist.is_initialized()
        self.rank = dist.get_rank() if self.distributed else 0
        self.pp_rank = dist.get_rank(self.pp_group) if self.distributed else 0
        pp_size = dist.get_world_size(self.pp_group) if self.distributed else 1
        if pp_size != plan["ranks"]:
            raise SetupError(
                f"rank {self.rank}: the plan is for {plan['ranks']} ranks but the pipeline "
                f"group has {pp_size}"
                + ("" if self.dp_group is not None else " (WORLD_SIZE)")
                + f": start {plan['ranks']} processes per pipeline"
            )
        self.dp_size = dist.get_world_size(self.dp_group) if self.dp_group is not None else 1
        self.dp_rank = dist.get_rank(self.dp_group) if self.dp_group is not None else 0
        self.stage_ids = list(plan["stages_of_rank"][self.pp_rank])
        if isinstance(stages, torch.nn.Module) and not isinstance(stages, torch.nn.ModuleList):
            raise SetupError(  # a Sequential would be taken apart into its layers
                f"rank {self.rank}: stages is one module ({type(stages).__name__}), not a list: "
                f"give this rank's stages {self.stage_ids} as a list of modules, e.g. [stage]"
            )
        stages = list(stages)
        if len(stages) != len(self.stage_ids):
            raise SetupError(
                f"rank {self.rank}: {count(len(stages), 'stage module')} given, but this rank "
                f"holds stages {self.stage_ids} of the plan"
            )
        for s, m in zip(self.stage_ids, stages):
            if not isinstance(m, torch.nn.Module):
                raise SetupError(f"rank {self.rank}: stage {s} is {type(m).__name__}, not a Module")
        if wrong := check_stage_order(stages, self.stage_ids, plan["stages"], self.rank):
            raise SetupError(wrong)
        self.stages = stages
        self.loss_fn = loss_fn
        self.device = torch.device(device) if device is not None else _device_of(stages)
        self.timeout_s = None if timeout_s is None else check_timeout(timeout_s)
        self.has_first_stage = 0 in self.stage_ids
        self.has_last_stage = plan["stages"] - 1 in self.stage_ids
        check_loss_fn(loss_fn, f"rank {self.rank}", needed=self.has_last_stage)
        self._to_global = (
            (lambda r: dist.get_global_rank(self.pp_group, r))
            if self.distributed and self.pp_group is not None
            else (lambda r: r)
        )
        tied = tied_copies(shared, self)
        self.reducer = GradReducer(
            stages,
            plan["programs"][self.pp_rank],
            dp_group=self.dp_group,
            dp_size=self.dp_size,
            dp_src=dist.get_global_rank(self.dp_group, 0) if self.dp_group is not None else 0,
            pp_group=self.pp_group,
            tied=tied,
            rank=self.rank,
            timeout_s=self.timeout_s,
            broadcast_buffers=broadcast_buffers,
        )
        if meta is None and plan.get("meta"):
            try:
                meta = meta_from_json(plan["meta"])
            except ValueError as e:
                raise PlanError(str(e)) from None
        self.meta = meta
        self.executor: Executor | None = None
        self.step_count = 0
        self._evaluator: Executor | None = None  # the evaluation plan's, at the first evaluate
        self.eval_count = 0
        self.nonfinite = nonfinite
        if self.distributed:
            self._start(tied)

    # ---------------------------------------------------------------- set-up
    def _start(self, tied: list[TiedCopy]) -> None:
        self._agree_on_plan()
        pairs = plan_pairs(self.plan, self._to_global)
        for t in tied:
            for r in t.others:
                pairs.add((min(self.rank, r), max(self.rank, r)))
        warm_up(pairs, self.rank, self.device, self.pp_group, self.timeout_s)
        self.reducer.sync_start()

    def _agree_on_plan(self) -> None:
        """Every rank of the pipeline and data-parallel groups runs the same plan."""
        digest = int(self.plan["digest"].split(":")[-1][:15], 16)
        for group in (self.pp_group, self.dp_group):
            if group is None and self.dp_group is not None:
                continue
            t = torch.tensor([digest, -digest], dtype=torch.int64, device=self.device)
            try:
                work = dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group, async_op=True)
                wait_all([work], self.timeout_s)
            except RuntimeError as e:
                where = f"rank {self.rank}: checking that every rank runs the same plan"
                raise comm_error(where, (), e, self.timeout_s) from None
            if int(t[0]) != digest or -int(t[1]) != digest:
                raise SetupError(
                    f"rank {self.rank}: the ranks run different plans (their digests differ): "
                    "compile the schedule with the same ppir and arguments everywhere"
                )

    # ---------------------------------------------------------------- stepping
    def parameters(self) -> list:
        """This rank's trainable parameters, each once (tied copies on one rank are one)."""
        return [p for _, p in self.named_parameters()]

    def named_parameters(self) -> list:
        """``(name, parameter)`` for :meth:`parameters` (optimizer groups), each named
        ``stage{s}.{its name in stage s}`` after the first stage holding it."""
        seen, out = set(), []
        for s, m in zip(self.stage_ids, self.stages):
            for name, p in m.named_parameters():
                if p.requires_grad and id(p) not in seen:
                    seen.add(id(p))
                    out.append((f"stage{s}.{name}", p))
        return out

    def clip_grad_norm_(
        self, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False
    ):
        """Clip the whole model's gradients (after :meth:`step`, each parameter once across
        ranks) as ``torch.nn.utils.clip_grad_norm_`` would on one process; its norm before
        clipping, the same on every rank, a 0-dim tensor (:mod:`ppir.torch.clip`)."""
        from ppir.torch.clip import clip_grad_norm_

        return clip_grad_norm_(self, max_norm, norm_type, error_if_nonfinite)

    @contextlib.contextmanager
    def no_sync(self):
        """Steps inside the block keep their gradients local, as in DDP's ``no_sync``: no
        reduction over the data-parallel replicas and no sum across tied copies.  The first
        step after the block reduces and sums everything accumulated since the last such step,
        so k accumulation steps cost one reduction; the gradients then equal those of k
        synchronised steps (up to round-off).  Nor do those steps broadcast buffers from
        replica 0 (``broadcast_buffers``), as DDP's skip it.  Call the optimizer (and
        :meth:`clip_grad_norm_`, which refuses before it) only after that step."""
        before, self.reducer.sync = self.reducer.sync, False
        try:
            yield
        finally:
            self.reducer.sync = before

    @property
    def loss_rank(self) -> int:
        """The global rank whose :meth:`step` returns this replica's loss (it holds the last
        stage): ``dist.broadcast(t, rt.loss_rank, group=rt.pp_group)`` logs it everywhere."""
        return self._to_global(self.plan["placement"][-1])

    @property
    def peak_saved(self) -> int:
        return self.executor.peak_saved if self.executor else 0

    def step(self, inputs=None, targets=None):
        """One training step on this replica's batch (see the module docstring)."""
        self._check_autograd()
        xs = self._split(inputs, "inputs", 0) if self.has_first_stage else None
        ys = (
            self._split(targets, "targets", self.plan["stages"] - 1)
            if self.has_last_stage
            else None
        )
        return self.step_microbatches(xs, ys)

    def _split(self, batch, name: str, stage: int, call: str = "step()") -> list:
        """``batch`` cut into the plan's M microbatches; ValueError naming the rank."""
        if batch is None:
            raise ValueError(
                f"rank {self.rank}: this rank holds stage {stage}, so {call} needs its {name} "
                f"(got None)"
            )
        try:
            return V.split_batch(batch, self.plan["microbatches"], f"rank {self.rank}: the {name}")
        except TypeError as e:
            raise ValueError(str(e)) from None

    def evaluate(self, inputs=None, targets=None):
        """The loss of a forward-only pass over this replica's batch, without gradients
        (:mod:`ppir.torch.evaluation`); None on ranks without the last stage."""
        from ppir.torch.evaluation import evaluate

        return evaluate(self, inputs, targets)

    def step_microbatches(self, inputs: list | None = None, targets: list | None = None):
        """One training step on M microbatches given as lists."""
        self._check_autograd()
        self._check_lists(inputs, targets)
        if self.reducer.sync:  # not inside no_sync(), as DDP skips it after a no_sync forward
            self.reducer.sync_buffers()  # replica 0's buffers (broadcast_buffers)
        if self.executor is None:
            self.reducer.check_replicas(self.device)
            self.executor = self._executor(inputs[0] if self.has_first_stage else None)
        loss = self.executor.step(inputs, targets, self.step_count)
        self.step_count += 1
        return loss

    def _check_lists(self, inputs, targets) -> None:
        M = self.plan["microbatches"]
        for name, given, needed in (
            ("inputs", inputs, self.has_first_stage),
            ("targets", targets, self.has_last_stage),
        ):
            if needed and (not isinstance(given, (list, tuple)) or len(given) != M):
                stage = 0 if name == "inputs" else self.plan["stages"] - 1
                raise ValueError(
                    f"rank {self.rank}: the {name} must be a list of {count(M, 'microbatch')} "
                    f"on the rank holding stage {stage}"
                )

    def _check_autograd(self) -> None:
        """A step backpropagates: refuse one under ``torch.no_grad()`` or
        ``torch.inference_mode()``, or of an evaluation plan, before anything is posted (the
        peers would wait for gradients this rank cannot compute)."""
        if is_evaluation_plan(self.plan):
            raise SetupError(
                f"rank {self.rank}: this plan has no backward (a forward-only program): it "
                "cannot train; compile the training schedule and call evaluate() for a "
                "forward-only pass"
            )
        if not torch.is_grad_enabled():
            raise RuntimeFailure(
                f"rank {self.rank}: step() trains: it needs autograd enabled; call it outside "
                "torch.no_grad() / torch.inference_mode() (evaluate() runs a forward-only "
                "pass)"
            )

    def _executor(self, sample, plan: dict | None = None) -> Executor:
        """An executor of the training plan, or of ``plan`` (an evaluation plan: no gradient
        reductions, its own boundary shapes), the shapes inferred from ``sample`` (microbatch
        0 on the rank holding stage 0) unless known."""
        training = plan is None
        plan = self.plan if training else plan
        meta = self.meta if training else None
        if meta is None:
            meta = infer_meta(
                plan,
                self.pp_rank,
                self.stages,
                sample,
                self.device,
                group=self.pp_group,
                peer=self._to_global,
                rank=self.rank,
                timeout_s=self.timeout_s,
            )
            if training:
                self.meta = meta
        return Executor(
            plan,
            self.pp_rank,
            self.stages,
            self.loss_fn,
            meta,
            self.device,
            rank=self.rank,
            group=self.pp_group,
            peer=self._to_global,
            reducer=self.reducer if training else None,
            nonfinite=self.nonfinite,
            timeout_s=self.timeout_s,
            tag=0 if training else EVALUATION_TAG,
        )


def _device_of(stages) -> torch.device:
    for m in stages:
        for p in m.parameters():
            return p.device
    return torch.device("cpu")
