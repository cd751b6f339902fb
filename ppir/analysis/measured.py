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
    transfer = 1.2e-4          # seconds: one boundary message between two ranks, as in the run
    post = 2.5e-4              # seconds: a rank posting one group of sends/recvs, as in the run
                               # (the posting thread's processor time)
    post_wall = 3e-4           # optional: the same posts' wall time, which the estimator
                               # charges where every rank has a processor of its own
    transfer_isolated = 1e-4   # informative: the same message alone (ping-pong)
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

from ppir.analysis.measured_shared import SharedBytes, fit_shared, from_list
from ppir.diagnostics import error

SECTION = "measured"
_INFO = (
    "model",
    "schedule",
    "ranks",
    "microbatches",
    "microbatch_size",
    "steps",
    "device",
    "processors",
    "transfer_isolated",
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
)
KEYS = {
    "stages",
    "transfer",
    "post",
    "post_wall",
    "message_bytes",
    "ranks",
    "microbatches",
    "microbatch_size",
    "schedule",
    "device",
    "model",
    "steps",
    "transfer_isolated",
    "processors",
    "shared",
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

    def post_time(self, ranks: int, processors: int | None) -> float:
        """What posting a group costs a schedule's rank: the posts' wall time when every rank
        has a processor of its own (``processors`` unset or at least ``ranks``: the time it
        blocks is lost to it, and nothing else in the timeline counts it), else their
        processor time (the timeline's processor sharing stretches it, as it did the wall
        time of the measured posts)."""
        if self.post_wall and (processors is None or ranks <= processors):
            return self.post_wall
        return self.post

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
        n = stages // pipelines if pipelines > 0 else 0
        if n == self.stages:
            return self
        if n <= 0 or self.stages % n:
            fits = [d for d in range(1, self.stages + 1) if self.stages % d == 0]
            split = f" ({pipelines} pipelines of {n})" if pipelines > 1 else ""
            raise error(
                "bad-config",
                f"the measured costs are for {self.stages} stages; a schedule with {stages} "
                f"stages{split} cannot use them",
                hints=[
                    f"schedules {'whose pipelines have' if pipelines > 1 else 'with'} "
                    f"{', '.join(map(str, fits))} stages can; or profile again with --stages "
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
        lines = [f"# {c}" for c in comment.splitlines()] + [f"[{SECTION}]"]
        for k, v in self.info:
            lines.append(f"{k} = {_toml(v)}")
        lines.append(f"stages = {self.stages}")
        for k in ("F", "B", "I", "W", "W_late", "FB"):
            if getattr(self, k):
                lines.append(f"{k} = {_toml(list(getattr(self, k)))}")
        lines.append(f"transfer = {_toml(self.transfer)}")
        if self.post:
            lines.append(f"post = {_toml(self.post)}")
        if self.post_wall:
            lines.append(f"post_wall = {_toml(self.post_wall)}")
        for k in (
            "message_bytes",
            "activation_bytes",
            "param_bytes",
            "frozen_bytes",
            "optimizer_bytes",
        ):
            if getattr(self, k):
                lines.append(f"{k} = {_toml(list(getattr(self, k)))}")
        if self.shared:
            lines.append(f"shared = [{', '.join(e.to_toml() for e in self.shared)}]")
        return "\n".join(lines) + "\n"


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
        lists[k] = _numbers(table[k], f"{SECTION}.{k}", where, S)
    mb = table.get("message_bytes", [])
    mbs = _numbers(mb, f"{SECTION}.message_bytes", where, S - 1) if mb else ()
    seconds = {}
    for k in ("transfer", "post", "post_wall"):
        x = table.get(k, 0.0)
        if isinstance(x, bool) or not isinstance(x, (int, float)) or x < 0:
            raise error("bad-config", f"{where}: {SECTION}.{k} must be seconds >= 0, got {x!r}")
        seconds[k] = float(x)
    from ppir.analysis.config import positive_count, processors_setting

    processors_setting(table, where, SECTION)
    if "microbatch_size" in table:
        positive_count(table["microbatch_size"], f"{SECTION}.microbatch_size", where)
    info = tuple((k, table[k]) for k in _INFO if k in table)
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
    )


def measured_config(data: dict, kw: dict, model, where: str):
    """Op times and the message time come from the ``[measured]`` table; a model, if given,
    only sizes memory.  Settings that would give times another way are refused.  (Called by
    :func:`ppir.analysis.config.make_config`, which has checked the sections' keys.)"""
    from ppir.analysis.config import (
        COMM_MODELS,
        CostConfig,
        Link,
        positive_count,
        processors_setting,
    )

    measured = from_table(data["measured"], where)
    clash = [f"costs.{k}" for k in kw if k in ("F", "B", "I", "W", "FB", "stage_weights")]
    clash += [
        f"hardware.{k}"
        for k in data.get("hardware", {})
        if k not in ("ranks_per_node", "processors")
    ]
    clash += [f"comm.{k}" for k in data.get("comm", {}) if k not in ("free", "model")]
    if clash:
        raise error(
            "bad-config",
            f"{where}: {', '.join(clash)} cannot be combined with [measured]: the measured costs "
            "give every op and message time",
            hints=["drop those settings, or the [measured] table to use the analytic model"],
        )
    rpn = data.get("hardware", {}).get("ranks_per_node")
    if rpn is not None:
        rpn = positive_count(rpn, "hardware.ranks_per_node", where)
    comm = data.get("comm", {})
    cm = comm.get("model", "rendezvous")
    if cm not in COMM_MODELS:
        raise error("bad-config", f"{where}: comm.model must be one of {', '.join(COMM_MODELS)}")
    if comm.get("free") is True:  # free communication: no transfer, and no post either
        link = Link(0.0)
        measured = replace(measured, post=0.0, post_wall=0.0)
    else:  # a measured transfer of 0 (done while its post ran) keeps the measured posts
        link = Link(measured.transfer)
    processors = processors_setting(data.get("hardware", {}), where)
    if processors is None:  # hardware.processors = 0 (--processors 0): one per rank
        processors = dict(measured.info).get("processors")
    return CostConfig(
        model=model,
        recompute=kw.get("recompute", "none"),
        stage_layers=kw.get("stage_layers"),
        measured=measured,
        ranks_per_node=rpn,
        processors=processors or None,
        intra=link,
        inter=link,
        comm_model=cm,
    )


def _numbers(v, key: str, where: str, n: int) -> tuple[float, ...]:
    """``v`` as a tuple of ``n`` non-negative floats; else a ppir error naming what is wrong:
    the count, or the first entry that is not a non-negative number (and its place)."""
    want = f"{where}: {key} must be a list of {n} non-negative finite numbers"
    if not isinstance(v, list):
        raise error("bad-config", f"{want}, got {type(v).__name__} {v!r:.40}")
    if len(v) != n:
        raise error("bad-config", f"{want}, got {len(v)}")
    for i, x in enumerate(v):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x < math.inf:
            raise error("bad-config", f"{want}, got {x!r:.40} at index {i}")
    return tuple(float(x) for x in v)


def _toml(v) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _lcm(a: int, b: int) -> int:
    import math

    return a * b // math.gcd(a, b)
