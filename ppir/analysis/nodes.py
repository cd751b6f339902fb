"""Where the ranks sit: how many pipeline ranks share a node, and which link a data-parallel
ring uses.

A node has ``gpus_per_node`` GPUs (``hardware.gpus_per_node``, default 8).  A pipeline rank is a
tensor-parallel group of ``tp`` GPUs, and its ``dp`` data-parallel replicas sit next to it:
Megatron-LM's default rank order puts tensor and data parallelism inside pipeline parallelism
(``megatron/core/parallel_state.py``, order ``tp-cp-ep-dp-pp``), and ppir's mesh puts the
replicas of a stage next to each other likewise (:func:`ppir.torch.procgroup.make_mesh`).  So
one pipeline rank with its replicas spans ``tp x dp`` GPUs, and

* pipeline ranks per node = ``max(1, gpus_per_node // (tp x dp))`` unless
  ``hardware.ranks_per_node`` (``--ranks-per-node``) says otherwise; a message between two
  pipeline ranks uses the inter-node link when they sit on different nodes
  (:meth:`ppir.analysis.costs.Costs.link`): with tp = 8 on 8-GPU nodes, every one;
* a data-parallel ring of ``D`` replicas of a ``tp``-GPU rank stays within a node when
  ``tp x D <= gpus_per_node``, else its slowest hop is the inter-node link
  (:func:`ppir.analysis.dp.dp_link`).

Without a model (times in units) tp = dp = 1: ``gpus_per_node`` pipeline ranks per node.
The placement is exact when tp x dp divides ``gpus_per_node`` (or is a multiple of it); with
dp = 3 on 8-GPU nodes some ranks straddle two nodes and are still priced as above.
"""

from __future__ import annotations

from dataclasses import replace

GPUS_PER_NODE = 8


def pipeline_ranks_per_node(cfg) -> int:
    """Pipeline ranks per node under ``cfg`` (a :class:`ppir.analysis.config.CostConfig`)."""
    if cfg.ranks_per_node is not None:
        return cfg.ranks_per_node
    m = cfg.model
    return max(1, cfg.gpus_per_node // (m.tp * m.dp if m is not None else 1))


def ranks_per_node_words(cfg, dps=None) -> str:
    """``N ranks/node`` under ``cfg``; for candidates of several data-parallel sizes ``dps``
    (``ppir tune``'s, whose config leaves dp to each one) the range their dp sizes give, as
    each candidate is timed with its own."""
    m = cfg.model
    if not dps or m is None or cfg.ranks_per_node is not None:
        n = pipeline_ranks_per_node(cfg)
        return f"{n} rank{'s' * (n != 1)}/node"
    ns = {pipeline_ranks_per_node(replace(cfg, model=replace(m, dp=d))) for d in dps}
    if len(ns) == 1:
        return ranks_per_node_words(replace(cfg, model=replace(m, dp=min(dps))))
    return f"{min(ns)} to {max(ns)} ranks/node ({cfg.gpus_per_node} GPUs / (tp x dp))"


def dp_ring_within_node(cfg, replicas: int) -> bool:
    """Whether a data-parallel ring of ``replicas`` stays within one node."""
    tp = cfg.model.tp if cfg.model is not None else 1
    return tp * replicas <= cfg.gpus_per_node
