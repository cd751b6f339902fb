"""What ``ppir analyze`` reports of a compiled program, computed in one place for the command
and :func:`ppir.analyze`: activation memory per rank, point-to-point traffic and, when sizes are
known, each rank's whole memory."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import NamedTuple

from ppir.analysis.footprint import Footprint, footprint
from ppir.analysis.measured_footprint import MeasuredFootprint, measured_footprint
from ppir.analysis.memory import MemoryReport, P2PReport, analyze_memory, analyze_p2p
from ppir.analysis.models import ModelShape


class Analysis(NamedTuple):
    """Activation memory, point-to-point traffic and, with a model or a measurement that
    sizes it, each rank's whole memory (parameters, gradients, optimizer state, activations,
    buffers, in bytes: :class:`~ppir.analysis.footprint.Footprint` or
    :class:`~ppir.analysis.measured_footprint.MeasuredFootprint`)."""

    memory: MemoryReport
    p2p: P2PReport
    footprint: Footprint | MeasuredFootprint | None = None


def with_layers(model: ModelShape, layers: int | None) -> ModelShape:
    """``model`` with ``layers`` layers (``analyze --layers``); ``model`` itself when None."""
    return replace(model, layers=layers) if layers else model


def analyze_compiled(
    compiled,
    model: ModelShape | None = None,
    *,
    recompute: str = "none",
    i_fraction: Fraction | None = None,
    layers: int | None = None,
) -> Analysis:
    """The analysis of ``compiled`` (a :class:`ppir.pipeline.Compiled` that verified):
    ``model`` sizes it (``layers``, when given, replaces the model's layer count); without
    one, the measured sizes of the cost file it was compiled with do, when it has them."""
    layout = compiled.config.stage_layers  # uneven: bytes per stage in the footprint only
    mem = analyze_memory(
        compiled.graph,
        model,
        recompute=recompute,
        i_fraction=i_fraction,
        layers=layers,
        stage_layers=layout,
    )
    p2p = analyze_p2p(compiled.graph, model)
    if model is not None:
        fp = footprint(
            compiled.program,
            with_layers(model, layers),
            recompute=recompute,
            memory=mem,
            stage_layers=layout,
        )
    else:
        fp = measured_footprint(compiled.program, compiled.config.measured, mem)
    return Analysis(mem, p2p, fp)
