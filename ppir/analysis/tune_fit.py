"""The memory side of a ``ppir tune`` choice: its worst rank's peak, and whether it fits
the budget, at the least ZeRO stage that makes it fit when tune searches ZeRO (0 or 1).

Contract of :func:`fit`: sets ``c.peak`` (and, with a model or measured sizes, ``c.largest``
and ``c.footprint``) from ``program``'s memory analysis ``mem`` and returns whether the peak
fits ``budget`` (None: always).  With ``zero_auto``, a choice with data-parallel replicas
(``c.dp`` > 1) and a model at ``zero=0`` that does not fit is counted again at ``zero=1``
(the optimizer state sharded over the replicas: Megatron-LM's distributed optimizer), and
``c.config.model.zero`` says which it keeps.  ZeRO-1 changes memory only: its
reduce-scatter and all-gather move the bytes of the all-reduce it replaces, so the step time
ppir estimates is the same, and the least stage that fits is the one to choose.  Stage 2
(gradients sharded) is not searched: under pipelining gradients accumulate over the
microbatches, so sharding them means a reduction per microbatch (DeepSpeed's PipelineEngine
refuses ZeRO stages 2 and 3 for that reason), a cost ppir does not time.
"""

from __future__ import annotations

from dataclasses import replace

from ppir.analysis.measured_footprint import whole_memory


def fit(c, program, mem, budget, zero_auto: bool = False) -> bool:
    """Whether ``c`` fits ``budget`` (see the module docstring)."""
    _peak(c, program, mem)
    while budget is not None and c.peak > budget[0] and zero_auto and _can_shard(c):
        model = c.config.model
        c.config = replace(c.config, model=replace(model, zero=model.zero + 1))
        _peak(c, program, mem)
    return budget is None or c.peak <= budget[0]


def _can_shard(c) -> bool:
    model = c.config.model if c.config is not None else None
    return model is not None and c.dp > 1 and model.zero < 1


def _peak(c, program, mem) -> None:
    """``c``'s worst-rank memory: the whole footprint with a model or measured sizes, else
    peak activations."""
    fp = whole_memory(program, c.config, mem, recompute=c.recompute, stage_layers=c.stage_layers)
    if fp is None:  # in A of one sample without a model (scale: mbs), as its times
        c.peak = float(max(x.peak_activations for x in mem.per_rank)) * c.scale
        return
    c.peak, c.largest, c.footprint = float(fp.worst.total), fp.worst.dominant, fp
