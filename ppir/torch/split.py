"""Cut a model whose layers sit in a ``ModuleList`` into pipeline stages, and find the
parameters that several stages share (tied embedding and head).

:func:`split_layers` returns one :class:`Stage` per pipeline stage: stage 0 runs ``first``
(e.g. the embeddings) before its layers, the last stage runs ``last`` (e.g. the final norm and
the head) after its layers, and the layers are spread as evenly as possible (earlier stages get
the remainder), or as ``sizes`` says.  Stages hold references to the model's own modules:
nothing is copied, so build the model the same way (same seed) on every rank and keep only the
stages of your rank.

Shared parameters are found by identity across all stages (:func:`find_shared`) and attached
to each stage as ``stage.ppir_shared``, which :class:`ppir.torch.PipelineRuntime` reads: their
gradients are summed across the ranks holding them, so the copies stay identical.
"""

from __future__ import annotations

import torch.nn as nn

from ppir.torch.values import call_stage


def _default_call(layer, x):
    return call_stage(layer, x)


class Stage(nn.Module):
    """``first`` (stage 0 only), ``layers`` in order, ``last`` (last stage only)."""

    def __init__(self, index: int, num_stages: int, layers, first=None, last=None, call=None):
        super().__init__()
        self.index, self.num_stages = index, num_stages
        self.first = first
        self.layers = nn.ModuleList(layers)
        self.last = last
        self._call = call or _default_call

    def forward(self, *args, **kwargs):
        if self.first is not None:
            x = self.first(*args, **kwargs)
        elif kwargs:
            x = kwargs
        else:
            x = args[0] if len(args) == 1 else args
        for layer in self.layers:
            x = self._call(layer, x)
        return call_stage(self.last, x) if self.last is not None else x


def layer_counts(n_layers: int, num_stages: int) -> list[int]:
    """As even as possible, earlier stages first: 10 layers on 4 stages -> [3, 3, 2, 2]."""
    return [
        n_layers // num_stages + (1 if s < n_layers % num_stages else 0) for s in range(num_stages)
    ]


def split_layers(
    layers,
    num_stages: int,
    *,
    first: nn.Module | None = None,
    last: nn.Module | None = None,
    call=None,
    sizes: list[int] | None = None,
    model: nn.Module | None = None,
) -> list[Stage]:
    """All ``num_stages`` stages of the model (see the module docstring).

    ``call(layer, x)`` runs one layer (default: ``layer(x)``, or ``layer(*x)``/``layer(**x)``
    for a tuple/dict, as the runtime calls a stage); ``first`` is called with the stage's
    inputs that way, and ``last`` with the last layer's output that way (not through
    ``call``); ``model`` (optional) names shared parameters by their names in it."""
    layers = list(layers)
    if num_stages < 1:
        raise ValueError(f"num_stages must be positive, got {num_stages}")
    sizes = list(sizes) if sizes is not None else layer_counts(len(layers), num_stages)
    if len(sizes) != num_stages or sum(sizes) != len(layers) or min(sizes) < 0:
        raise ValueError(
            f"sizes {sizes} must give {num_stages} non-negative layer counts adding up to "
            f"{len(layers)}"
        )
    stages, at = [], 0
    for s, n in enumerate(sizes):
        stages.append(
            Stage(
                s,
                num_stages,
                layers[at : at + n],
                first=first if s == 0 else None,
                last=last if s == num_stages - 1 else None,
                call=call,
            )
        )
        at += n
    shared = find_shared(stages, model)
    for s, st in enumerate(stages):
        st.ppir_shared = [e for e in shared if any(h[0] == s for h in e["holders"])]
    return stages


def check_stage_order(stages, stage_ids, num_stages: int, rank: int) -> str | None:
    """What is wrong with handing ``stages`` to a rank that holds the plan's ``stage_ids`` of
    ``num_stages``, judged by what the :class:`Stage` objects among them know of their place
    (None: nothing, or no Stage to judge by).  Another stage of the same shapes in a stage's
    place (the looped rule ``r, r + P`` under a V placement) trains a different model and
    raises nowhere, so the runtime refuses it before anything is posted."""
    cut = [m for m in stages if isinstance(m, Stage)]
    if cut and any(m.num_stages != num_stages for m in cut):
        n = next(m.num_stages for m in cut if m.num_stages != num_stages)
        return (
            f"rank {rank}: the stage modules were cut into {n} stages (split_layers), but the "
            f"plan has {num_stages}: cut them with split_layers(layers, program.stages, ...)"
        )
    if any(isinstance(m, Stage) and m.index != s for s, m in zip(stage_ids, stages)):
        given = ", ".join(str(m.index) if isinstance(m, Stage) else "?" for m in stages)
        own = " (?: a module of your own)" if "?" in given else ""
        return (
            f"rank {rank}: this rank holds stages {list(stage_ids)} of the plan, in that order, "
            f"but was given split_layers' stages [{given}]{own}: give it "
            f"[stages[s] for s in program.stages_of_rank[pp_rank]] (a V placement, as zbv's, "
            f"holds stages r and 2P - 1 - r)"
        )
    return None


def find_shared(stages: list[nn.Module], model: nn.Module | None = None) -> list[dict]:
    """Parameters held by more than one stage: ``[{"name", "holders": [[stage, name in that
    stage], ...]}]``, in the order of first appearance.  ``name`` lists the parameter's names
    in ``model`` when given (e.g. ``transformer.wte.weight = lm_head.weight``)."""
    where: dict[int, list] = {}
    for s, st in enumerate(stages):
        for name, p in st.named_parameters():
            where.setdefault(id(p), [])
            if all(h[0] != s for h in where[id(p)]):
                where[id(p)].append([s, name])
    aliases: dict[int, list[str]] = {}
    if model is not None:
        for name, p in model.named_parameters(remove_duplicate=False):
            aliases.setdefault(id(p), []).append(name)
    out = []
    for pid, holders in where.items():
        if len(holders) > 1:
            name = " = ".join(aliases.get(pid, [])) or holders[0][1]
            out.append({"name": name, "holders": holders})
    return out
