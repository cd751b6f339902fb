"""Measured per-stage costs: the ``[measured]`` table of a cost file (no torch needed).

``ppir profile`` writes it; the cost config loader (:func:`ppir.analysis.config.make_config`)
reads it, so ``compile --backend cost``, ``tune`` and ``viz`` time schedules with it.

Format (TOML, one table; every list has one entry per *measured* stage, seconds per microbatch)::

    [measured]
    stages = 4                 # the model was built with build_stage(s, 4)
    F = [...]                  # forward
    B = [...]                  # full backward
    I = [...]                  # backward-input (0 on a stage whose input needs no gradient)
    W = [...]                  # backward-weight, right after its own I
    W_late = [...]             # optional: a W run after the next microbatch's F and I instead
    FB = [...]                 # optional: a forward and a backward run back to back as one step
    F_near = [...]             # optional, all six or none: F, B and I with their input made on
    F_far = [...]              # their rank, and received from another (ppir.analysis.
    B_near = [...]             # measured_order); a stage costs the near time where the stage
    B_far = [...]              # it takes its input from is on its rank, else the far time
    I_near = [...]             # (F, B and I above: as 1F1B ran them)
    I_far = [...]
    near_share = [...]         # optional (CPU, a thread per rank): the processor share of the
    far_share = [...]          # ops timed near and far (op_times takes them for F_near ...)
    processor_share = [...]    # optional (CPU runs, one thread per rank): the share of the
                               # stage's op times its thread had a processor (see op_times)
    transfer = 1.2e-4          # seconds: one boundary message between two ranks, as in the run
    post = 2.5e-4              # seconds: a rank posting one group of sends/recvs, as in the run
                               # (the posting thread's processor time)
    post_wall = 3e-4           # optional: the same posts' wall time, which the estimator
                               # charges in its place (see post_time)
    transfer_isolated = 1e-4   # informative: the same message alone (ping-pong)
    step_time = 0.25           # informative: the median wall time of its 1F1B steps with whole
                               # backwards (what 'ppir profile' holds the estimate against)
    core_use = 0.9             # informative (CPU): the share of the cores its ranks could use
                               # that they kept busy in those steps
    oversubscription = 1.2     # optional (CPU, more ranks than processors): the factor on op
                               # and post times with which this file's estimate of the profiled
                               # 1F1B program is its step; op_times scales op and post times by
                               # it where ranks outnumber processors
    message_bytes = [...]      # one per boundary between measured stages (stages - 1 entries;
                               # a tuple or dict value: the sum over its tensors)
    activation_bytes = [...]   # saved for backward by one forward of the stage (bytes)
    param_bytes = [...]        # trainable parameters of the stage (bytes)
    frozen_bytes = [...]       # optional: its parameters without gradients and its buffers
    optimizer_bytes = [...]    # the model's optimizer state for the stage's parameters (bytes)
    shared = [{stages = [0, 3], param_bytes = ..., frozen_bytes = ..., optimizer_bytes = ...}]
                               # optional: a parameter those stages share (a tied embedding),
                               # in each one's sizes above; counted once where one rank or
                               # merged stage holds several (:mod:`.measured_shared`)
    ranks = 2                  # how the measurement ran: ranks, schedule, device (informative)
    microbatch_size = 8        # optional: samples (sequences) in one profiled microbatch, dim 0
                               # of make_batch's batch / the profile's microbatches: what
                               # 'tune --global-batch' (samples per step) divides by
    processors = 2             # CPU runs: the cores the ranks shared; the estimator runs
                               # the ranks on them too (hardware.processors, 0: one per rank)
    threads = 1                # CPU runs, informative: torch's threads per rank

A schedule with S stages uses the measurement when S divides the measured count: stage ``s``
is the sum of measured stages ``s*k .. s*k + k - 1`` (k = measured / S), since ``build_stage``
splits a model into consecutive pieces (a parameter several of them share counted once);
except I and W of stage 0, whose input needs no gradient (the runtime's I is empty there and
its W is the whole backward): I of piece 0, and W of piece 0 plus B of pieces 1 .. k - 1.  Any
other S is a ppir error naming the counts that fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ppir.analysis.measured_check import SECTION, numbers, shares
from ppir.analysis.measured_order import ORDER_KEYS, SHARE_KEYS, fit_order, processor_times
from ppir.analysis.measured_shared import SharedBytes, fit_shared, from_list
from ppir.diagnostics import count, error
from ppir.ir import deps

_INFO = (
    "model",
    "schedule",
    "ranks",
    "microbatches",
    "microbatch_size",
    "steps",
    "device",
    "processors",
    "threads",
    "transfer_isolated",
    "step_time",
    "core_use",
)
_PER_STAGE = (
    "F",
    "B",
    "I",
    "W",
    "W_late",
    "FB",
    "activation_bytes",
    "param_bytes",
    "optimizer_bytes",
    "frozen_bytes",
    "processor_share",
    *ORDER_KEYS,
    *SHARE_KEYS,
)
KEYS = {
    "stages",
    "transfer",
    "post",
    "post_wall",
    "oversubscription",
    "message_bytes",
    "shared",
    *_INFO,
    *_PER_STAGE,
}


@dataclass(frozen=True)
class MeasuredCosts:
    """Per-stage measured times (seconds) and sizes (bytes); see the module docstring."""

    stages: int
    F: tuple[float, ...]
    B: tuple[float, ...]
    I: tuple[float, ...]  # noqa: E741
    W: tuple[float, ...]
    transfer: float
    FB: tuple[float, ...] | None = None
    message_bytes: tuple[float, ...] = ()
    activation_bytes: tuple[float, ...] = ()
    param_bytes: tuple[float, ...] = ()
    info: tuple[tuple[str, object], ...] = ()
    post: float = 0.0
    """Processor seconds a rank spends posting one communication group (``batch_isend_irecv``)."""
    post_wall: float = 0.0
    """Wall seconds of the same posts (0: not measured): a post can also block, on its TCP
    pair's lock or while the rank's own progress thread runs; see :meth:`post_time`."""
    optimizer_bytes: tuple[float, ...] = ()
    """Per stage, the state the model's optimizer holds after a step (() when not measured)."""
    W_late: tuple[float, ...] = ()
    """Per stage, a W that runs after other ops, not right after its own I (() when not
    measured): :attr:`ppir.analysis.costs.Costs.late_w`."""
    frozen_bytes: tuple[float, ...] = ()
    """Per stage, what the stage holds beside its trainable parameters (``param_bytes``):
    parameters without gradients and the module's buffers (() when not measured: none)."""
    shared: tuple[SharedBytes, ...] = ()
    """The parameters several stages share, each counted in every holder's sizes
    (:mod:`ppir.analysis.measured_shared`; () when none is declared)."""
    processor_share: tuple[float, ...] = ()
    """Per stage, the processor seconds of its timed ops over their wall seconds (() when
    not measured): :meth:`op_times`."""
    order: tuple[tuple[str, tuple[float, ...]], ...] = ()
    """``(key, per stage)`` for ``ORDER_KEYS``, F, B and I by where their input was made, and
    ``SHARE_KEYS`` where measured (:mod:`ppir.analysis.measured_order`; () when not measured;
    :meth:`op_times` takes the shares and :meth:`fit` drops them: fit after op_times)."""
    oversubscription: float = 0.0
    """What running more ranks than processors costs beyond the timeline's fair sharing of
    them (the operating system's switching between ranks, their wake-ups): the factor on op
    and post times with which the file's estimate of the profiled 1F1B program is its measured
    step (:func:`ppir.profile.selfcheck.oversubscribed`; 0: not measured, the profile's ranks
    each had a processor, or the estimate without it was the step already): :meth:`op_times`."""

    def op_times(self, ranks: int, processors: int | None) -> MeasuredCosts:
        """The op and post times a schedule of ``ranks`` ranks is timed with: the measured
        wall times when every rank has a processor of its own, else their processor time
        (each op time times its stage's ``processor_share``; a post, ``post``): the ranks of
        the profile shared the processors too, so its wall times hold the waits for one, which
        the timeline's processor sharing models itself, stretching the times it is given by
        the company they have in the schedule; then times ``oversubscription`` where measured.
        Unchanged when the share was not measured."""
        if not self.processor_share or processors is None or ranks <= processors:
            return self
        over = self.oversubscription or 1.0

        def work(xs):
            return tuple(x * f * over for x, f in zip(xs, self.processor_share)) if xs else xs

        times = {k: work(getattr(self, k)) for k in ("F", "B", "I", "W", "W_late", "FB")}
        order = processor_times(self.order, self.processor_share)
        order = tuple((k, tuple(x * over for x in xs)) for k, xs in order)
        post = {"post": self.post * over, "post_wall": 0.0}  # processor time, as the ops
        return replace(self, **times, **post, order=order, processor_share=())

    def post_time(self) -> float:
        """What posting a group costs a rank with a processor of its own: the posts' measured
        wall time (``post_wall``; their processor time ``post`` in a file without it), since a
        post can block (on its TCP pair's lock, or while the rank's own progress thread runs)
        and the blocked time is lost to the rank.  Where ranks share processors,
        :meth:`op_times` charges the processor time instead (times ``oversubscription``): the
        wall time holds the waits for a processor, which the timeline's sharing models itself;
        charged as work it stretched interleaved 1F1B's many posts once more and ordered it
        behind ZB-H1 at 4 ranks on 2 cores, where the measured rounds order it ahead
        (docs/cost-model.md)."""
        return self.post_wall or self.post

    @property
    def microbatch_size(self) -> int | None:
        """Samples (sequences) in one profiled microbatch; None when the file does not say."""
        return dict(self.info).get("microbatch_size")

    def fit(self, stages: int, pipelines: int = 1) -> MeasuredCosts:
        """The costs of the model split into ``stages // pipelines`` stages (consecutive
        measured stages summed): a schedule of ``stages`` stages in ``pipelines`` pipelines,
        replicas of one model (bidirectional DualPipe: two), whose stage ``s`` runs model stage
        :func:`ppir.ir.deps.model_stage`; a ppir error when the model's stage count does not
        divide the measured count."""
        n = deps.pipeline_length(stages, pipelines) if pipelines > 0 else 0
        if n == self.stages:
            return self
        if n <= 0 or self.stages % n:
            fits = [d for d in range(1, self.stages + 1) if self.stages % d == 0]
            split = f" ({pipelines} pipelines of {n})" if pipelines > 1 else ""
            raise error(
                "bad-config",
                f"the measured costs are for {count(self.stages, 'stage')}; a schedule with "
                f"{count(stages, 'stage')}{split} cannot use them",
                hints=[
                    f"schedules {'whose pipelines have' if pipelines > 1 else 'with'} "
                    f"{', '.join(map(str, fits))} {'stage' if fits == [1] else 'stages'} can; "
                    f"or profile again with --stages "
                    f"{_lcm(self.stages, max(n, 1))}"
                ],
            )
        stages = n
        k = self.stages // stages

        def agg(xs):
            return tuple(sum(xs[s * k : s * k + k]) for s in range(stages)) if xs else xs

        # Stage 0's input (the data) has no gradient: its I computes nothing and its W runs
        # the whole backward (ppir.torch.backward), so the merged first stage is measured piece
        # 0's I and W plus the full backward of its other pieces, not the sum of their splits.
        shared, twice = fit_shared(self.shared, k, stages)  # a merged stage holds one copy

        def once(xs, term):
            return tuple(x - t[term] for x, t in zip(agg(xs), twice)) if xs else xs

        I, W, late = agg(self.I), agg(self.W), agg(self.W_late)
        if I and W and self.B:
            I = (self.I[0], *I[1:])
            W = (self.W[0] + sum(self.B[1:k]), *W[1:])
            late = (self.W_late[0] + sum(self.B[1:k]), *late[1:]) if late else late
        return MeasuredCosts(
            stages,
            agg(self.F),
            agg(self.B),
            I,
            W,
            self.transfer,
            agg(self.FB) if self.FB else None,
            tuple(self.message_bytes[s * k + k - 1] for s in range(stages - 1))
            if self.message_bytes
            else (),
            agg(self.activation_bytes),
            once(self.param_bytes, "param_bytes"),
            self.info,
            self.post,
            self.post_wall,
            once(self.optimizer_bytes, "optimizer_bytes"),
            late,
            once(self.frozen_bytes, "frozen_bytes"),
            shared,
            merged_share(self.processor_share, agg(self.F), agg(self.B), self.F, self.B, k),
            fit_order(self.order, k, stages),
            self.oversubscription,
        )

    def for_schedule(self, stages: int, pipelines: int = 1) -> tuple[MeasuredCosts, list[int]]:
        """The costs of the model's stages (:meth:`fit`) and, for each of the schedule's
        ``stages``, the model stage it runs (:func:`ppir.ir.deps.model_stage`): the one
        mapping its times and sizes are read by."""
        from ppir.ir.deps import model_stage

        return self.fit(stages, pipelines), [
            model_stage(s, stages, pipelines) for s in range(stages)
        ]

    @property
    def message_size(self) -> float:
        """The largest boundary message in bytes (0 when unknown)."""
        return max(self.message_bytes, default=0.0)

    def to_toml(self, comment: str = "") -> str:
        """The ``[measured]`` table as TOML text (readable by :func:`from_table`)."""
        from ppir.analysis.measured_toml import table_text

        return table_text(self, comment)


def from_table(table: dict, where: str) -> MeasuredCosts:
    """Validate a ``[measured]`` table; ppir errors (exit 2) name the key and the file."""
    for k in table:
        if k not in KEYS:
            from ppir.diagnostics import did_you_mean

            raise error(
                "bad-config",
                f"{where}: unknown key '{k}' in [{SECTION}]",
                hints=did_you_mean(k, sorted(KEYS)) + [f"keys: {', '.join(sorted(KEYS))}"],
            )
    S = table.get("stages")
    if not isinstance(S, int) or isinstance(S, bool) or S <= 0:
        raise error("bad-config", f"{where}: {SECTION}.stages must be a positive integer")
    lists = {}
    for k in _PER_STAGE:
        if k not in table:
            if k in ("F", "B", "I", "W"):
                raise error("bad-config", f"{where}: [{SECTION}] lacks {k} (one time per stage)")
            continue
        lists[k] = numbers(table[k], f"{SECTION}.{k}", where, S)
    mb = table.get("message_bytes", [])
    mbs = numbers(mb, f"{SECTION}.message_bytes", where, S - 1) if mb else ()
    seconds = {}
    for k in ("transfer", "post", "post_wall"):
        x = table.get(k, 0.0)
        if isinstance(x, bool) or not isinstance(x, (int, float)) or x < 0:
            raise error("bad-config", f"{where}: {SECTION}.{k} must be seconds >= 0, got {x!r}")
        seconds[k] = float(x)
    over = table.get("oversubscription", 0.0)
    if isinstance(over, bool) or not isinstance(over, (int, float)) or over < 0:
        raise error(
            "bad-config",
            f"{where}: {SECTION}.oversubscription must be a factor (0: none), got {over!r}",
        )
    from ppir.analysis.config import positive_count, processors_setting

    processors_setting(table, where, SECTION)
    if "microbatch_size" in table:
        positive_count(table["microbatch_size"], f"{SECTION}.microbatch_size", where)
    info = tuple((k, table[k]) for k in _INFO if k in table)
    order = tuple((k, lists[k]) for k in ORDER_KEYS if k in lists)
    order += tuple((k, shares(lists[k], table[k], where, k)) for k in SHARE_KEYS if k in lists)
    if order and len([k for k, _ in order if k in ORDER_KEYS]) != len(ORDER_KEYS):
        lacks = ", ".join(k for k in ORDER_KEYS if k not in lists)
        has = ", ".join(k for k, _ in order)
        raise error(
            "bad-config",
            f"{where}: [{SECTION}] has {has} but lacks {lacks} (the near and far times "
            f"come all six together, and their shares need them)",
        )
    return MeasuredCosts(
        S,
        lists["F"],
        lists["B"],
        lists["I"],
        lists["W"],
        seconds["transfer"],
        lists.get("FB"),
        mbs,
        lists.get("activation_bytes", ()),
        lists.get("param_bytes", ()),
        info,
        seconds["post"],
        seconds["post_wall"],
        lists.get("optimizer_bytes", ()),
        lists.get("W_late", ()),
        lists.get("frozen_bytes", ()),
        from_list(table["shared"], f"{SECTION}.shared", where, S) if "shared" in table else (),
        shares(lists.get("processor_share", ()), table.get("processor_share"), where),
        order,
        float(over),
    )


def merged_share(share, F, B, F1, B1, k: int) -> tuple[float, ...]:
    """The processor share of stages merging ``k`` measured ones: their shares weighted by
    their F + B (``F``, ``B``: the merged stages'; ``F1``, ``B1``: the measured ones')."""
    if not share:
        return ()
    out = []
    for s, total in enumerate(f + b for f, b in zip(F, B)):
        part = range(s * k, s * k + k)
        out.append(sum((F1[j] + B1[j]) * share[j] for j in part) / total if total else 1.0)
    return tuple(out)


def _lcm(a: int, b: int) -> int:
    return a * b // math.gcd(a, b)
