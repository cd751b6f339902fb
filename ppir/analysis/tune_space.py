"""What ``ppir tune`` searches (:class:`Space`) and what it finds for each choice
(:class:`Candidate`): the data of :mod:`ppir.analysis.tune`, which re-exports them."""

from __future__ import annotations

from dataclasses import dataclass, field

from ppir.analysis.config import CostConfig
from ppir.analysis.estimate import Estimate
from ppir.analysis.footprint import Footprint
from ppir.diagnostics import error


class Builtin(str):
    """A built-in's name in :func:`ppir.analysis.tune.search`'s list, loaded whatever the
    working directory holds (a plain ``str`` is resolved as every command's SCHEDULE: an
    existing file first)."""


@dataclass
class Candidate:
    schedule: str
    pp: int
    dp: int
    v: int
    mbs: int
    microbatches: int | None  # per step: global batch / (dp x mbs); None: it does not divide
    recompute: str = "none"
    stage_layers: tuple[int, ...] | None = None  # None: even (or no model)
    given_m: int | None = None  # the schedule's M (-D M=) for that step; None: not loaded
    bound: float | None = None  # dependency bound (per step; in per-sample units without a model)
    step_time: float | None = None  # compiled
    peak: float | None = None  # worst rank: whole-memory bytes with a model, else A
    largest: str | None = None  # the largest memory term on the worst rank
    estimate: Estimate | None = None
    footprint: Footprint | None = None
    reason: str | None = None  # None: ranked
    why: str = ""  # pruned, divisibility, constraint or memory
    file: str | None = None  # the schedule file the reason points into (tune_load.refused_file)
    config: CostConfig | None = field(default=None, repr=False)
    program: object = field(default=None, repr=False)
    input_timeline: object = field(default=None, repr=False, compare=False)  # the bound's run
    costs: object = field(default=None, repr=False, compare=False)  # of config, for program
    scale: int = field(default=1, repr=False, compare=False)  # mbs without a model, else 1

    @property
    def ok(self) -> bool:
        return self.reason is None

    @property
    def zero(self) -> int | None:
        """The ZeRO stage its memory is counted at (None without a model)."""
        model = self.config.model if self.config is not None else None
        return model.zero if model is not None else None


DEFAULT_VS = (1, 2, 4)
"""The v ``ppir tune`` tries without ``--v`` (and, with a model, :meth:`Space.vs_for`'s)."""


@dataclass(frozen=True)
class Space:
    """What :func:`search` tries.  ``pps`` None: every P dividing world / tp."""

    world: int
    tp: int = 1
    pps: tuple[int, ...] | None = None
    global_batch: int = 0  # 0: default_global_batch
    micro_batches: tuple[int, ...] = (1,)
    vs: tuple[int, ...] | None = None  # None: :meth:`vs_for`'s default grid
    recomputes: tuple[str, ...] = ("none",)
    uneven: bool = True
    top: int = 10
    zero_auto: bool = False  # ZeRO-1 where ZeRO-0 does not fit (tune_fit.fit)
    # fixed values of the schedules' other parameters (-D), for each schedule declaring them
    defines: tuple[tuple[str, int], ...] = ()

    def vs_for(self, pp: int, layers: int | None) -> tuple[int, ...]:
        """The v (stages per rank) to try at pipeline size ``pp``: ``vs`` when given, else
        :data:`DEFAULT_VS` and, with a model of ``layers`` layers and ``pp`` > 1, every v
        that splits each rank's layers evenly into v chunks (``layers % (pp x v) == 0``,
        Megatron-LM's condition for its virtual pipeline size)."""
        if self.vs is not None:
            return self.vs
        if not layers or pp < 2:
            return DEFAULT_VS
        even = (v for v in range(1, layers // pp + 1) if layers % (pp * v) == 0)
        return tuple(sorted(set(DEFAULT_VS).union(even)))

    def searched_sizes(self, model) -> list[tuple[int, int]]:
        """The (P, dp) pairs a search tries: :meth:`pipeline_sizes` with a ``model``, else the
        one pipeline of ``world`` ranks (``-P``), without data parallelism."""
        return self.pipeline_sizes() if model is not None else [(self.world, 1)]

    def pipeline_sizes(self) -> list[tuple[int, int]]:
        """(P, dp) pairs with P x dp x tp = world."""
        if self.world < 1 or self.tp < 1 or self.world % self.tp:
            raise error(
                "bad-usage", f"--world {self.world} must be a positive multiple of --tp {self.tp}"
            )
        n = self.world // self.tp
        ps = [p for p in range(1, n + 1) if n % p == 0]
        if self.pps is not None:
            bad = [p for p in self.pps if p < 1 or n % p]
            if bad:
                raise error(
                    "bad-usage",
                    f"pipeline size {bad[0]} does not divide world / tp = {n}",
                    hints=[f"pipeline sizes for {n} GPUs per tensor-parallel slot: {ps}"],
                )
            ps = sorted(set(self.pps))
        return [(p, n // p) for p in ps]


def default_global_batch(space: Space) -> int:
    """Four sequences per pipeline-and-data-parallel slot (world / tp) when none is given."""
    return 4 * space.world // space.tp
