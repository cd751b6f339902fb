"""Whole per-rank memory from a ``ppir profile`` measurement, for a model known only by its
measured sizes (no :class:`~ppir.analysis.models.ModelShape`): what ``compile --backend cost`` and
``tune`` report, and what a byte budget checks, with a ``[measured]`` cost file.

Contract
--------
:func:`measured_footprint` returns, per rank, in bytes, the terms of
:mod:`ppir.analysis.footprint` from the profile's per-stage sizes (stage ``s`` of the schedule is
the sum of its measured pieces, as :meth:`MeasuredCosts.fit` sums times):

* ``params``: ``param_bytes`` and ``frozen_bytes`` of the rank's stages: its trainable
  parameters, and its parameters without gradients and module buffers, as the model holds them
  (a file without ``frozen_bytes`` has none); a parameter several of the rank's stages of one
  copy of the model share (``shared``: a tied embedding and head on one rank, a V placement)
  counts once, as the runtime holds one tensor for it (:mod:`.measured_shared`), in every
  term below too;
* ``grads``: ``param_bytes`` again: the runtime keeps one gradient per trainable parameter, in
  its dtype;
* ``optimizer``: ``optimizer_bytes`` of the rank's stages: the state the model's own optimizer
  (``make_optimizer``, else the runtime's plain SGD: none) holds after one step, as the profile
  counted it;
* ``activations``: the peak over the rank's program of ``activation_bytes`` (what autograd saved
  for one forward of the stage, counted by saved-tensor hooks) in flight, by
  :func:`ppir.analysis.footprint.activation_peaks` (the memory analysis' alloc/free rule);
* ``buffers``: the peak of received-but-unconsumed messages times the largest measured message.

A schedule of several pipelines (bidirectional DualPipe: two copies of the model) sizes each
stage as the model stage it runs (:func:`ppir.ir.deps.model_stage`), as its times are.  None
when the file lacks any of the three sizes (a profile older than ``optimizer_bytes``, or one
whose optimizer could not be made in the profile).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ppir.analysis.footprint import (
    Footprint,
    RankFootprint,
    activation_peaks,
    footprint,
)
from ppir.analysis.measured import MeasuredCosts
from ppir.analysis.measured_shared import overcounted
from ppir.analysis.memory import MemoryReport
from ppir.ir import Schedule


@dataclass(frozen=True)
class MeasuredFootprint:
    """Result of :func:`measured_footprint` (the fields :mod:`ppir.cli.footprint_view` reads)."""

    schedule: str
    source: str
    per_rank: tuple[RankFootprint, ...]
    memory: MemoryReport
    copies: int = 1
    """As Footprint's: the copies of the model the schedule's stages cover (its pipelines)."""

    worst = Footprint.worst  # the same rule: the largest total, the lowest rank on ties


def sized(measured: MeasuredCosts | None) -> bool:
    """True when ``measured`` holds the three sizes a whole-memory figure needs."""
    return measured is not None and all(
        (measured.activation_bytes, measured.param_bytes, measured.optimizer_bytes)
    )


def sizes_known(cfg) -> bool:
    """True when ``cfg`` (a :class:`~ppir.analysis.config.CostConfig`) gives memory in bytes:
    a model shape, or a measurement with its sizes."""
    return cfg.model is not None or sized(cfg.measured)


def whole_memory(
    program: Schedule, cfg, mem: MemoryReport, *, recompute: str = "none", stage_layers=None
) -> Footprint | MeasuredFootprint | None:
    """The whole per-rank memory of ``program`` under ``cfg`` (a
    :class:`~ppir.analysis.config.CostConfig`): from its model shape
    (:func:`ppir.analysis.footprint.footprint`), else from its measured sizes
    (:func:`measured_footprint`), else None (memory in A only).  ``stage_layers`` defaults to
    the config's layout."""
    if cfg.model is not None:
        layout = stage_layers if stage_layers is not None else cfg.stage_layers
        return footprint(program, cfg.model, recompute=recompute, memory=mem, stage_layers=layout)
    return measured_footprint(program, cfg.measured, mem)


def measured_footprint(
    schedule: Schedule, measured: MeasuredCosts | None, mem: MemoryReport
) -> MeasuredFootprint | None:
    """Per-rank memory of ``schedule`` from ``measured`` sizes (see the module docstring; None
    without them); ``mem`` is :func:`ppir.analysis.memory.analyze_memory`'s report of the same
    program."""
    if not sized(measured):
        return None
    m, at = measured.for_schedule(schedule.stages, schedule.pipelines)  # stage s runs at[s]
    message = Fraction(m.message_size)
    peaks = activation_peaks(schedule, mem, [Fraction(m.activation_bytes[j]) for j in at])
    per_rank = []
    for r, ((act, op), rm) in enumerate(zip(peaks, mem.per_rank)):
        stages = schedule.stages_of_rank[r]
        twice = _twice(m, at, stages)
        params = _held(m.param_bytes, at, stages) - twice["param_bytes"]
        per_rank.append(
            RankFootprint(
                rank=r,
                stages=stages,
                param_count=Fraction(0),  # not measured: the bytes are
                params=params + _held(m.frozen_bytes, at, stages) - twice["frozen_bytes"],
                grads=params,
                optimizer=_held(m.optimizer_bytes, at, stages) - twice["optimizer_bytes"],
                activations=Fraction(act),
                buffers=rm.peak_recv * message,
                peak_op=op,
            )
        )
    info = dict(measured.info)
    source = ", ".join(f"{k} {info[k]}" for k in ("model", "device") if k in info)
    return MeasuredFootprint(schedule.name, source, tuple(per_rank), mem, schedule.pipelines)


def _twice(m: MeasuredCosts, at: list, stages) -> dict[str, Fraction]:
    """Per term, the bytes :func:`_held` counts more than once for ``stages``: those of the
    parameters several of them share within one copy of the model (stage ``s`` is the model
    stage ``at[s]`` of copy ``s // m.stages``); 0 for a term the file has no sizes of."""
    copies: dict[int, list[int]] = {}
    for s in stages:
        copies.setdefault(s // m.stages, []).append(at[s])
    out = dict.fromkeys(("param_bytes", "frozen_bytes", "optimizer_bytes"), Fraction(0))
    for held in copies.values():
        for k, v in overcounted(m.shared, held).items():
            out[k] += Fraction(v) if getattr(m, k) else 0
    return out


def _held(sizes: tuple, at: list, stages) -> Fraction:
    """The measured bytes of ``stages`` (schedule stages, each the model stage ``at[s]``); 0
    when the file has no such sizes."""
    return sum((Fraction(sizes[at[s]]) for s in stages), Fraction(0)) if sizes else Fraction(0)
