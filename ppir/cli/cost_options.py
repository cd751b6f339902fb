"""Command-line options of the cost model, shared by every command that compiles (through
:func:`ppir.cli.common.add_compile_arguments`) and by ``ppir tune``: :func:`add_cost_arguments`
and :func:`config_from_args`.

Precedence: command-line flags over the ``--config`` TOML file over presets and defaults.
Options are registered with ``dest`` names prefixed ``cost_``, so they never collide with a
command's own settings.  A flag that is already taken on the parser is a programming error
(argparse raises :class:`argparse.ArgumentError`), except ``--dp``, which ``ppir launch``'s
runtime options define too with the same meaning: every flag means one thing in every command,
which ``tests/test_flag_vocabulary.py`` checks over all of them.

Units are in the flag or its help, never switched by another flag: ``--comm-latency`` and
``--inter-latency`` are in forwards of a rank share (the unit of times without a model),
``--comm-latency-us`` and ``--inter-latency-us`` in microseconds (with a model, whose times are
seconds).  For one release ``--comm-latency`` with a model is still read as microseconds, with a
one-line deprecation warning naming ``--comm-latency-us``.
"""

from __future__ import annotations

import argparse
from fractions import Fraction

from ppir.analysis.config import (
    COMM_MODELS,
    HARDWARE,
    CostConfig,
    load_config_file,
    make_config,
    merge,
)
from ppir.analysis.model_spec import model_table, parse_model_spec, spec_help
from ppir.analysis.models import model_hint
from ppir.analysis.units import comma_entries
from ppir.cli.arg_actions import Joined
from ppir.cli.argtypes import integer, number, positive_int
from ppir.cli.deprecation import warn_deprecated
from ppir.cli.flag_words import in_flag_words
from ppir.diagnostics import PpirError, did_you_mean, error, given_twice

# (unit-less flag, microsecond flag, config key in time units, config key in microseconds)
LATENCY_FLAGS = (
    ("--comm-latency", "--comm-latency-us", "latency", "intra_latency_us"),
    ("--inter-latency", "--inter-latency-us", "inter_latency", "inter_latency_us"),
)


def add_cost_arguments(group, model: bool = True, recompute: bool = True, dp: bool = True) -> None:
    """The cost-model options (config, model, hardware, costs, links, data parallelism); with
    ``model=False`` only those that make sense without a model shape on the command line
    (a ``--config`` file may still give one); ``recompute=False`` and ``dp=False`` leave
    ``--recompute`` (and ``--stage-layers``) and ``--dp`` out (``ppir tune`` searches them
    itself)."""
    group.add_argument(
        "--config",
        dest="cost_config",
        metavar="FILE",
        help="cost-model settings in TOML (see examples/cost_config.toml)",
    )
    if model:
        _add_model_arguments(group, recompute)
    group.add_argument(
        "--ranks-per-node",
        dest="cost_ranks_per_node",
        type=integer,
        metavar="N",
        help="pipeline ranks per node (a count): messages between nodes use the inter-node "
        "link (default: --gpus-per-node / (tp x dp) with a model, at least 1; without one, "
        "--gpus-per-node)",
    )
    group.add_argument(
        "--gpus-per-node",
        dest="cost_gpus_per_node",
        type=integer,
        metavar="N",
        help="GPUs per node (default 8): a pipeline rank with its replicas spans tp x dp of "
        "them, and a data-parallel ring beyond a node uses the inter-node link",
    )
    group.add_argument(
        "--processors",
        dest="cost_processors",
        type=integer,
        metavar="N",
        help="the ranks' compute and transfers share N processors, e.g. 4 gloo ranks on 2 CPU "
        "cores: work running at once slows down in proportion (default: one per rank, or the "
        "cores a CPU 'ppir profile' file recorded; 0: one per rank)",
    )
    if dp:
        _add_dp(group)
    group.add_argument(
        "--cost",
        dest="cost_costs",
        action=Joined,
        metavar="K=X,...",
        help="op costs in forwards of a rank share, e.g. F=1,B=2,I=1,W=1 (the defaults); "
        "FB=X times an overlapped F&B step as X forwards (default F+B; FB=B: perfect overlap)",
    )
    group.add_argument(
        "--stage-weights",
        dest="cost_stage_weights",
        metavar="W0,W1,...",
        help="per-stage cost multipliers (factors on the op costs), one per stage (e.g. "
        "heavier first and last stage)",
    )
    group.add_argument(
        "--comm-latency",
        dest="cost_latency",
        metavar="T",
        help="per-message latency on the intra-node link in forwards of a rank share (time "
        "units; without a model; default: free communication); with a model use "
        "--comm-latency-us",
    )
    group.add_argument(
        "--comm-latency-us",
        dest="cost_latency_us",
        metavar="US",
        help="per-message latency on the intra-node link in microseconds (needs a model: "
        + (
            "--model or a [model] table in --config; default: the --hardware preset's)"
            if model
            else "a [model] table in --config; default: its hardware preset's)"
        ),
    )
    group.add_argument(
        "--inter-latency",
        dest="cost_inter_latency",
        metavar="T",
        help="per-message latency between nodes in forwards of a rank share (time units; "
        "without a model; default: --comm-latency's)",
    )
    group.add_argument(
        "--inter-latency-us",
        dest="cost_inter_latency_us",
        metavar="US",
        help="per-message latency between nodes in microseconds (needs a model; default: "
        + ("the --hardware preset's)" if model else "the config's hardware preset's)"),
    )
    group.add_argument(
        "--comm-model",
        dest="cost_comm_model",
        choices=list(COMM_MODELS),
        help="how the estimator times a message: rendezvous (default; what the runtime "
        "guarantees: groups, one FIFO of groups per rank) or latency (the papers' model: a "
        "consumer waits for its producer plus the transfer time, nothing else)",
    )
    if model:
        group.add_argument(
            "--bandwidth",
            dest="cost_bandwidth",
            metavar="GB/s",
            help="intra-node link bandwidth per direction in GB/s (needs --model)",
        )
        group.add_argument(
            "--inter-bandwidth",
            dest="cost_inter_bandwidth",
            metavar="GB/s",
            help="inter-node link bandwidth per direction in GB/s (needs --model)",
        )
        group.add_argument(
            "--free-comm",
            dest="cost_free_comm",
            action="store_true",
            default=None,
            help="make communication free even with a model",
        )


def _add_dp(group) -> None:
    """``--dp D``.  ``ppir launch``'s runtime options (``ppir.torch.run.add_run_arguments``,
    registered first) define the same flag with the same meaning, data-parallel replicas, which
    ``tests/test_flag_vocabulary.py`` checks; there that one serves both.  This is the only
    flag the cost options share (any other clash is an argparse error)."""
    try:
        group.add_argument(
            "--dp",
            type=positive_int,
            default=None,
            metavar="D",
            help="data-parallel replicas of the pipeline: time each stage's gradient reduction "
            "(a ring all-reduce after its last backward) and report how much the drain hides "
            "(default 1)",
        )
    except argparse.ArgumentError:  # launch: the runtime's --dp, the same option
        pass


def add_stage_layers_argument(group) -> None:
    """``--stage-layers`` (the config's ``[model] stage_layers``)."""
    group.add_argument(
        "--stage-layers",
        dest="cost_stage_layers",
        metavar="L0,L1,...",
        help="layers of each stage, for layers that do not split evenly (needs a model): "
        "counts or COUNTxREPEATS, e.g. 6,7x10,6 (ppir tune's layers column); default: an "
        "even split",
    )


def _add_model_arguments(group, recompute: bool) -> None:
    example = "llama3-8b,seq=4096,mbs=2" if recompute else "llama3-70b,zero=1 (mbs, dp: searched)"
    group.add_argument(
        "--model",
        dest="cost_model",
        metavar="SPEC",
        help="model shape: a preset (gpt3-175b, llama3-8b, llama3-70b, llama3-405b, gpt2-xl) "
        f"and/or key=value fields, e.g. {example}; times become seconds; {spec_help()}",
    )
    if recompute:
        group.add_argument(
            "--recompute",
            dest="cost_recompute",
            choices=["none", "selective", "full"],
            help="activation recomputation (full adds a forward to each backward)",
        )
        add_stage_layers_argument(group)  # like --recompute, a choice 'ppir tune' searches
    group.add_argument(
        "--hardware",
        dest="cost_hardware",
        metavar="PRESET",
        help=f"accelerator preset for a model: {', '.join(HARDWARE)} (default H100)",
    )
    group.add_argument(
        "--efficiency",
        dest="cost_efficiency",
        type=number,
        metavar="FRACTION",
        help="achieved fraction of peak FLOP/s (default 0.5)",
    )


def refuse_recompute_without_model(value: str) -> None:
    """The error for ``--recompute`` where only a model gives it a meaning (the cost model: a
    model's activation bytes and backward time; ``ppir analyze`` and ``sweep`` use it without
    one, for how much of an activation I frees)."""
    raise error(
        "bad-usage",
        f"--recompute {value} needs a model: recomputation is timed and sized through a "
        "model's activation bytes and backward time",
        hints=[model_hint(cli=True)],
    )


def settings_from_args(args: argparse.Namespace) -> dict:
    """The nested settings dict: the ``--config`` file with the flags laid over it."""
    g = lambda name: getattr(args, f"cost_{name}", None)  # noqa: E731
    base = load_config_file(g("config")) if g("config") else {}
    if "measured" in base:  # first: the flags' own checks would point elsewhere
        _refuse_times_over_measured(g)
    over: dict = {}
    if g("model") is not None:  # replaces the file's [model] table (its recompute setting is kept)
        fields = model_table(parse_model_spec(g("model")))
        file_model = base.pop("model", {})
        if isinstance(file_model, dict) and "recompute" in file_model:
            fields["recompute"] = file_model["recompute"]
        over["model"] = fields
    if g("recompute"):
        if "model" not in over and "model" not in base:  # it made up a 24-layer model
            refuse_recompute_without_model(g("recompute"))
        over.setdefault("model", {})["recompute"] = g("recompute")
    if g("stage_layers"):
        if "model" not in over and "model" not in base:
            raise error(
                "bad-usage",
                f"--stage-layers {g('stage_layers')} needs a model: it splits a model's layers",
                hints=[model_hint(cli=True)],
            )
        over.setdefault("model", {})["stage_layers"] = g("stage_layers")
    hw = {
        "preset": g("hardware"),
        "efficiency": g("efficiency"),
        "ranks_per_node": g("ranks_per_node"),
        "gpus_per_node": g("gpus_per_node"),
        "processors": g("processors"),
    }
    over["hardware"] = {k: v for k, v in hw.items() if v is not None}
    costs: dict = op_costs(g("costs"), OP_KINDS, "bad-config") if g("costs") is not None else {}
    if g("stage_weights") is not None:  # '' too: refused, as --cost '' is
        costs["stage_weights"] = [w.strip() for w in g("stage_weights").split(",")]
    over["costs"] = costs
    comm: dict = {}
    has_model = "model" in over or "model" in base
    for (flag, us_flag, unit_key, us_key), name in zip(LATENCY_FLAGS, ("latency", "inter_latency")):
        units, us = g(name), g(f"{name}_us")
        if units is not None and us is not None:
            raise error(
                "bad-config",
                f"give {flag} (forwards of a rank share, without a model) or {us_flag} "
                "(microseconds, with a model), not both",
            )
        if us is not None:
            if not has_model:
                raise error(
                    "bad-config",
                    f"{us_flag} {us}: microseconds need a model (times are seconds only with one)",
                    hints=[f"{model_hint(cli=True)}; or give {flag} in forwards of a rank share"],
                )
            comm[us_key] = us
        elif units is not None and has_model:  # the old meaning, kept for one release
            warn_deprecated(
                f"{flag} {units} with a model is read as microseconds: write {us_flag} {units} "
                f"({flag} will be in forwards of a rank share only)"
            )
            comm[us_key] = units
        elif units is not None:
            comm[unit_key] = units
    for flag, key in (
        ("bandwidth", "intra_bandwidth_gbs"),
        ("inter_bandwidth", "inter_bandwidth_gbs"),
    ):
        if g(flag) is not None:
            comm[key] = g(flag)
    if g("free_comm"):  # a link flag beside it was dropped without a word
        if clash := [f"{flag} {g(name)}" for name, flag in _TIME_FLAGS[4:] if g(name) is not None]:
            raise error("bad-usage", f"--free-comm with {', '.join(clash)}: give one or the other")
        comm["free"] = True
    if g("comm_model"):
        comm["model"] = g("comm_model")
    over["comm"] = comm
    return merge(base, {k: v for k, v in over.items() if v})


# The op kinds --cost times, and what each command says of them when one is unknown
OP_KINDS = {"F": "", "B": "", "I": "", "W": "", "FB": "an overlapped F&B step"}


def op_costs(text: str, kinds: dict[str, str], kind: str) -> dict[str, str]:
    """``--cost F=1, B=2`` -> ``{"F": "1", "B": "2"}`` (kinds and values as written,
    stripped; a trailing comma allowed, as ``--model`` allows it), for the op ``kinds`` a
    command times (kind -> what it is, "" when the letter says it).  A malformed or empty
    entry, an unknown kind, or a kind given twice with two numbers (``2`` and ``2.0`` are one)
    is a ppir error of ``kind``: the one parser of ``--cost`` for every command.  The values
    are checked as numbers by their reader."""
    out: dict[str, str] = {}
    names = ", ".join(f"{k} ({what})" if what else k for k, what in kinds.items())
    if not text.strip():  # was read as no --cost at all
        raise error(kind, f"--cost {text!r}: expected K=X,..., e.g. --cost F=1,B=2")
    for part in comma_entries(text, f"--cost {text}", kind):  # a trailing comma allowed
        k, eq, v = (x.strip() for x in part.partition("="))
        if not eq or not k:
            raise error(kind, f"--cost {text}: expected K=X,..., e.g. --cost F=1,B=2")
        if k not in kinds:
            raise error(
                kind,
                f"--cost {text}: unknown op kind '{k}'",
                hints=did_you_mean(k, list(kinds)) + [f"op kinds: {names}"],
            )
        if k in out and not _same_number(out[k], v):
            raise error(
                kind,
                f"--cost {text}: {given_twice(k, out[k], v)}",
                hints=["give each op kind once"],
            )
        out[k] = v
    return out


def _same_number(a: str, b: str) -> bool:
    """Whether two ``--cost`` values are one number (``2`` and ``2.0``; text that is no number
    only equals itself), so that a kind repeated with its value is accepted, as ``-D`` is."""
    try:
        return Fraction(a) == Fraction(b)
    except (ValueError, ZeroDivisionError):
        return a == b


# The flags that give op or message times, which a [measured] table gives instead (the same
# settings measured_config refuses in a file; here named by the flag the user typed).
_TIME_FLAGS = (
    ("costs", "--cost"),
    ("stage_weights", "--stage-weights"),
    ("hardware", "--hardware"),
    ("efficiency", "--efficiency"),
    ("latency", "--comm-latency"),
    ("latency_us", "--comm-latency-us"),
    ("inter_latency", "--inter-latency"),
    ("inter_latency_us", "--inter-latency-us"),
    ("bandwidth", "--bandwidth"),
    ("inter_bandwidth", "--inter-bandwidth"),
)


def _refuse_times_over_measured(g) -> None:
    clash = [flag for name, flag in _TIME_FLAGS if g(name) is not None]
    if clash:
        raise error(
            "bad-usage",
            f"{', '.join(clash)} cannot be combined with --config {g('config')}: its "
            "[measured] table gives every op and message time",
            hints=[f"drop {', '.join(clash)}, or use a cost file without [measured]"],
        )


def config_from_args(args: argparse.Namespace) -> CostConfig:
    """The validated :class:`CostConfig` for the parsed command line."""
    where = getattr(args, "cost_config", None) or "cost options"
    settings = settings_from_args(args)
    try:
        return make_config(settings, where)
    except PpirError as e:  # a value a flag set is named by the flag (ppir.cli.flag_words)
        raise in_flag_words(e, args, where) from None
