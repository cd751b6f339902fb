"""Cost-option errors in the words the user typed.  ``make_config`` checks the nested settings
and names a setting by its key (``hardware.efficiency``), which is what a ``--config`` file
says; a value that came from a flag is named by the flag and the value given
(``--efficiency 45: hardware.efficiency is a fraction of peak in (0, 1], got 45``)."""

from __future__ import annotations

from dataclasses import replace

from ppir.diagnostics import PpirError

# settings key -> the flags that set it, each with the attribute the parser stores it in
FLAGS_OF_KEY = {
    "hardware.preset": (("--hardware", "cost_hardware"),),
    "hardware.efficiency": (("--efficiency", "cost_efficiency"),),
    "hardware.ranks_per_node": (("--ranks-per-node", "cost_ranks_per_node"),),
    "hardware.gpus_per_node": (("--gpus-per-node", "cost_gpus_per_node"),),
    "hardware.processors": (("--processors", "cost_processors"),),
    "comm.intra_bandwidth_gbs": (("--bandwidth", "cost_bandwidth"),),
    "comm.inter_bandwidth_gbs": (("--inter-bandwidth", "cost_inter_bandwidth"),),
    "costs.stage_weights": (("--stage-weights", "cost_stage_weights"),),
    "comm.latency": (("--comm-latency", "cost_latency"),),
    "comm.inter_latency": (("--inter-latency", "cost_inter_latency"),),
    # with a model, the unit-less flags are still read as microseconds for one release
    "comm.intra_latency_us": (
        ("--comm-latency-us", "cost_latency_us"),
        ("--comm-latency", "cost_latency"),
    ),
    "comm.inter_latency_us": (
        ("--inter-latency-us", "cost_inter_latency_us"),
        ("--inter-latency", "cost_inter_latency"),
    ),
}


def in_flag_words(e: PpirError, args, where: str) -> PpirError:
    """``e`` with its ``WHERE: KEY ...`` prefix replaced by ``FLAG VALUE: KEY ...`` when the
    key's value came from a flag on the command line; a model error that names no source,
    which can only come from the ``[model]`` table of the ``--config`` file (``--model`` and
    ``--recompute`` are checked as they are read), prefixed ``FILE: [model]: ``; ``e`` itself
    otherwise."""
    d = e.diagnostics[0]
    if (
        d.kind in ("bad-model", "unknown-model")
        and where != "cost options"
        and not d.message.startswith("--")
    ):
        message = f"{where}: [model]: {d.message}"
        return PpirError([replace(d, message=message), *e.diagnostics[1:]], e.exit_code)
    for key, flags in FLAGS_OF_KEY.items():
        if not d.message.startswith(f"{where}: {key} "):
            continue
        for flag, dest in flags:
            value = getattr(args, dest, None)
            if value is not None:
                shown = f"{value:g}" if isinstance(value, float) else value  # 45, not 45.0
                message = f"{flag} {shown}: {d.message[len(where) + 2 :]}"
                return PpirError([replace(d, message=message), *e.diagnostics[1:]], e.exit_code)
    rest = d.message[len(where) + 2 :]
    layers = getattr(args, "cost_stage_layers", None)  # its text, as ppir.analysis.layout read it
    if layers and d.message.startswith(f"{where}: entry ") and "not a layer count" in rest:
        message = f"--stage-layers {layers}: {rest}"  # was 'cost options: entry 1 ...'
        return PpirError([replace(d, message=message), *e.diagnostics[1:]], e.exit_code)
    if d.message.startswith(f"{where}: costs.") and getattr(args, "cost_costs", None):
        from ppir.cli.cost_options import OP_KINDS, op_costs  # (it imports this module)

        key = rest[len("costs.") :].split(" ", 1)[0]  # an op kind: costs.F must be ...
        typed = op_costs(args.cost_costs, OP_KINDS, "bad-usage")  # as typed: it parsed once
        if key in typed:
            message = f"--cost {key}={typed[key]}: {rest}"
            return PpirError([replace(d, message=message), *e.diagnostics[1:]], e.exit_code)
    return e
