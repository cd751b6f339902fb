"""Command-line options of the cost model, shared by ``ppir compile --backend cost`` and
``ppir tune``: :func:`add_cost_arguments` and :func:`config_from_args`.

Precedence: command-line flags over the ``--config`` TOML file over presets and defaults.
Options are registered with ``dest`` names prefixed ``cost_``, so they never collide with a
command's own settings.  A flag the command (or another backend) already registered on the same
parser keeps its meaning there and the cost option is left out, never an argparse crash: e.g.
``ppir check --progress`` is the verifier's progress model.  Conflicts are detected through
argparse's public contract (with the default ``conflict_handler="error"``, ``add_argument``
raises :class:`argparse.ArgumentError` and registers nothing), not its private tables.
"""

from __future__ import annotations

import argparse

from ppir.analysis.config import (
    COMM_MODELS,
    HARDWARE,
    CostConfig,
    load_config_file,
    make_config,
    merge,
)
from ppir.analysis.models import PRESETS, model_fields, parse_model_spec
from ppir.diagnostics import did_you_mean, error


def _add(group, flag: str, **kw) -> None:
    """Register one cost option unless ``flag`` is already taken on ``group``'s parser."""
    try:
        group.add_argument(flag, **kw)
    except argparse.ArgumentError:  # the flag is taken: the existing option keeps its meaning
        pass


def add_cost_arguments(group, model: bool = True) -> None:
    """The cost-model options (config, model, hardware, costs, links); with
    ``model=False`` only those that make sense without a model shape on the command line
    (a ``--config`` file may still give one)."""
    _add(
        group,
        "--config",
        dest="cost_config",
        metavar="FILE",
        help="cost-model settings in TOML (see examples/cost_config.toml)",
    )
    if model:
        _add_model_arguments(group)
    _add(
        group,
        "--ranks-per-node",
        dest="cost_ranks_per_node",
        type=int,
        metavar="N",
        help="pipeline ranks per node: messages between nodes use the inter-node link (default 8)",
    )
    _add(
        group,
        "--dp",
        type=int,
        default=None,
        metavar="D",
        help="data-parallel replicas: time each stage's gradient reduction (a ring all-reduce "
        "after its last backward) and report how much the drain hides (default 1)",
    )
    _add(
        group,
        "--cost",
        dest="cost_costs",
        metavar="K=X,...",
        help="op costs in forwards of a rank share, e.g. F=1,B=2,I=1,W=1 (the defaults); "
        "FB=X times an overlapped F&B step as X forwards (default F+B; FB=B: perfect overlap)",
    )
    _add(
        group,
        "--stage-weights",
        dest="cost_stage_weights",
        metavar="W0,W1,...",
        help="per-stage cost multipliers, one per stage (e.g. heavier first and last stage)",
    )
    _add(
        group,
        "--comm-latency",
        dest="cost_latency",
        metavar="T",
        help="per-message latency on the intra-node link: microseconds with --model, time "
        "units without (default: free communication without a model)",
    )
    _add(
        group,
        "--inter-latency",
        dest="cost_inter_latency",
        metavar="T",
        help="per-message latency between nodes (same units as --comm-latency)",
    )
    _add(
        group,
        "--comm-model",
        dest="cost_comm_model",
        choices=list(COMM_MODELS),
        help="how the estimator times a message: rendezvous (default; what the runtime "
        "guarantees: groups, one FIFO of groups per rank) or latency (the papers' model: a "
        "consumer waits for its producer plus the transfer time, nothing else)",
    )
    if model:
        _add(
            group,
            "--bandwidth",
            dest="cost_bandwidth",
            metavar="GB/s",
            help="intra-node link bandwidth per direction (needs --model)",
        )
        _add(
            group,
            "--inter-bandwidth",
            dest="cost_inter_bandwidth",
            metavar="GB/s",
            help="inter-node link bandwidth per direction (needs --model)",
        )
        _add(
            group,
            "--free-comm",
            dest="cost_free_comm",
            action="store_true",
            default=None,
            help="make communication free even with a model",
        )


def _add_model_arguments(group) -> None:
    _add(
        group,
        "--model",
        dest="cost_model",
        metavar="SPEC",
        help="model shape: a preset (gpt3-175b, llama3-8b, llama3-70b, llama3-405b, gpt2-xl) "
        "and/or key=value fields, e.g. llama3-8b,seq=4096,mbs=2; times become seconds",
    )
    _add(
        group,
        "--recompute",
        dest="cost_recompute",
        choices=["none", "selective", "full"],
        help="activation recomputation (full adds a forward to each backward)",
    )
    _add(
        group,
        "--hardware",
        dest="cost_hardware",
        metavar="PRESET",
        help=f"accelerator preset for a model: {', '.join(HARDWARE)} (default H100)",
    )
    _add(
        group,
        "--efficiency",
        dest="cost_efficiency",
        type=float,
        metavar="FRACTION",
        help="achieved fraction of peak FLOP/s (default 0.5)",
    )


def settings_from_args(args: argparse.Namespace) -> dict:
    """The nested settings dict: the ``--config`` file with the flags laid over it."""
    g = lambda name: getattr(args, f"cost_{name}", None)  # noqa: E731
    base = load_config_file(g("config")) if g("config") else {}
    over: dict = {}
    if g("model"):  # replaces the file's [model] table (its recompute setting is kept)
        model = parse_model_spec(g("model"))
        fields = model_fields(model)
        if model.name in PRESETS:
            fields["preset"] = model.name
        file_model = base.pop("model", {})
        if isinstance(file_model, dict) and "recompute" in file_model:
            fields["recompute"] = file_model["recompute"]
        over["model"] = fields
    if g("recompute"):
        over.setdefault("model", {})["recompute"] = g("recompute")
    hw = {
        "preset": g("hardware"),
        "efficiency": g("efficiency"),
        "ranks_per_node": g("ranks_per_node"),
    }
    over["hardware"] = {k: v for k, v in hw.items() if v is not None}
    costs: dict = {}
    if g("costs"):
        for part in g("costs").split(","):
            k, eq, v = part.partition("=")
            if not eq or not k.strip():
                raise error(
                    "bad-config", f"--cost {g('costs')}: expected K=X,..., e.g. --cost F=1,B=2"
                )
            if k.strip() not in ("F", "B", "I", "W", "FB"):
                raise error(
                    "bad-config",
                    f"--cost: unknown op kind '{k.strip()}'",
                    hints=did_you_mean(k.strip(), ["F", "B", "I", "W", "FB"])
                    + ["op kinds: F, B, I, W, and FB (an overlapped F&B step)"],
                )
            costs[k.strip()] = v.strip()
    if g("stage_weights"):
        costs["stage_weights"] = [w.strip() for w in g("stage_weights").split(",")]
    over["costs"] = costs
    comm: dict = {}
    has_model = "model" in over or "model" in base
    lat_keys = (("latency", "intra_latency_us"), ("inter_latency", "inter_latency_us"))
    for flag, (unit_key, us_key) in zip(("latency", "inter_latency"), lat_keys):
        if g(flag) is not None:
            comm[us_key if has_model else unit_key] = g(flag)
    for flag, key in (
        ("bandwidth", "intra_bandwidth_gbs"),
        ("inter_bandwidth", "inter_bandwidth_gbs"),
    ):
        if g(flag) is not None:
            comm[key] = g(flag)
    if g("free_comm"):
        comm["free"] = True
    if g("comm_model"):
        comm["model"] = g("comm_model")
    over["comm"] = comm
    return merge(base, {k: v for k, v in over.items() if v})


def config_from_args(args: argparse.Namespace) -> CostConfig:
    """The validated :class:`CostConfig` for the parsed command line."""
    where = getattr(args, "cost_config", None) or "cost options"
    return make_config(settings_from_args(args), where)
