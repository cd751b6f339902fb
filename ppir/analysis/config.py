"""Cost-model configuration: op costs, model shape, hardware preset and links, validated.

Contract
--------
* :class:`CostConfig` is frozen; build it with :func:`make_config` from a nested dict shaped like
  the TOML file (sections ``costs``, ``model``, ``hardware``, ``comm``; see
  ``examples/cost_config.toml`` and ``docs/cost-model.md``).  Every bad value raises a ppir
  diagnostic (exit 2) naming the key, with a did-you-mean hint for unknown keys and presets.
* Two time bases.  Without a model, times are *units*: one forward of a full rank share costs
  ``costs.F`` (default 1) and communication is free unless ``comm.latency`` is set (in units).
  With a model, times are *seconds*: a forward of a stage costs its FLOPs over the hardware's
  peak × efficiency, and each message costs latency + bytes / bandwidth on the intra- or
  inter-node link (:mod:`ppir.analysis.nodes`).
* Costs and unit-mode latencies are kept as exact fractions, so uniform estimates are exact.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

from ppir.analysis.layout import stage_layers_setting
from ppir.analysis.measured import KEYS as MEASURED_KEYS
from ppir.analysis.measured import MeasuredCosts
from ppir.analysis.measured_config import measured_config
from ppir.analysis.measured_text import info_text, sharing_note
from ppir.analysis.models import SPEC_FIELDS, ModelShape, check_recompute, make_model, model_hint
from ppir.analysis.nodes import GPUS_PER_NODE, ranks_per_node_words
from ppir.analysis.toml_file import (  # noqa: F401 (re-exported)
    _toml_position,
    load_config_file,
    merge,
)
from ppir.analysis.units import fmt_exact, processors_meaning, unit_meaning
from ppir.diagnostics import count, did_you_mean, error


@dataclass(frozen=True)
class Hardware:
    """An accelerator and its cluster links.  Bandwidths in GB/s (1e9 bytes/s, one direction),
    latencies in seconds."""

    name: str
    peak_tflops: float
    intra_bandwidth_gbs: float
    intra_latency: float
    inter_bandwidth_gbs: float
    inter_latency: float


# Dense bf16 peaks (NVIDIA's H100/H200 and A100 data sheets) and typical links: NVLink ~450 GB/s
# per direction on H100/H200 (300 on A100), InfiniBand NDR 400 Gb/s ~ 50 GB/s (HDR 200 on A100).
HARDWARE: dict[str, Hardware] = {
    "H100": Hardware("H100", 989.0, 450.0, 3e-6, 50.0, 8e-6),
    "H200": Hardware("H200", 989.0, 450.0, 3e-6, 50.0, 8e-6),
    "A100": Hardware("A100", 312.0, 300.0, 3e-6, 25.0, 8e-6),
}
DEFAULT_EFFICIENCY = 0.5

COMM_MODELS = ("rendezvous", "latency")

SECTIONS = {
    "costs": {"F", "B", "I", "W", "FB", "stage_weights"},
    "model": {"preset", "recompute", "stage_layers", *SPEC_FIELDS},
    "hardware": {
        "preset",
        "peak_tflops",
        "efficiency",
        "ranks_per_node",
        "gpus_per_node",
        "processors",
    },
    "measured": MEASURED_KEYS,
    "comm": {
        "free",
        "model",
        "latency",
        "inter_latency",
        "intra_latency_us",
        "inter_latency_us",
        "intra_bandwidth_gbs",
        "inter_bandwidth_gbs",
    },
}


@dataclass(frozen=True)
class Link:
    """One link class: ``latency`` in the run's time unit, ``bandwidth`` in bytes per time unit
    (``None``: messages have no size-dependent cost)."""

    latency: Fraction | float = 0
    bandwidth: float | None = None

    def time(self, nbytes: float) -> Fraction | float:
        if self.bandwidth is None or not nbytes:
            return self.latency
        return self.latency + nbytes / self.bandwidth


@dataclass(frozen=True)
class CostConfig:
    """Everything the estimator needs besides the schedule.  ``CostConfig()`` is the textbook
    default: F=1, B=2, I=1, W=1 per rank share, free communication, times in units."""

    F: Fraction = Fraction(1)
    B: Fraction = Fraction(2)
    I: Fraction = Fraction(1)  # noqa: E741
    W: Fraction = Fraction(1)
    FB: Fraction | None = None  # an overlapped F&B step, in forwards; None: F + B (its parts)
    stage_weights: tuple[Fraction, ...] | None = None
    stage_layers: tuple[int, ...] | None = None  # with a model: layers per stage (uneven splits)
    model: ModelShape | None = None
    recompute: str = "none"
    measured: MeasuredCosts | None = None  # per-stage times from 'ppir profile' (seconds)
    hardware: Hardware | None = None
    efficiency: float = DEFAULT_EFFICIENCY
    ranks_per_node: int | None = None  # pipeline ranks per node; None: ppir.analysis.nodes
    gpus_per_node: int = GPUS_PER_NODE
    intra: Link = Link()
    inter: Link = Link()
    processors: int | None = None
    """How many processors the ranks' work shares (``hardware.processors``; a CPU profile
    records its cores): None, a processor per rank and links of their own; set, processor
    sharing of compute and transfers (:mod:`ppir.analysis.timeline`)."""
    comm_model: str = "rendezvous"
    """How a message is timed: ``rendezvous`` (default; what the runtime guarantees: a message
    moves once both of its groups are posted, one FIFO of groups per rank) or ``latency`` (the
    papers' model: the consumer of a value waits for its producer plus the transfer time, and
    nothing else -- the dependency bound of the compute order)."""

    @property
    def time_unit(self) -> str:
        """``"s"`` (seconds) with a model or measured costs, ``"unit"`` (one rank-share
        forward) without."""
        return "s" if self.model is not None or self.measured is not None else "unit"

    @property
    def free_comm(self) -> bool:
        return all(
            link.latency == 0 and link.bandwidth is None for link in (self.intra, self.inter)
        )

    def describe(self, mbs: bool = True, ranks=None, dps=None) -> str:
        """One line saying what the numbers assume (without the micro-batch size if not mbs),
        for ``ranks`` ranks when given (or candidates of those sizes: processors_meaning) and
        candidates of data-parallel sizes ``dps`` (tune's; else the model's dp)."""
        costs = " ".join(f"{k}={fmt_exact(getattr(self, k))}" for k in "FBIW")
        if self.FB is not None:
            costs += f" FB={fmt_exact(self.FB)}"
        if self.measured is not None:
            m = self.measured
            how = info_text(m) or "ppir profile"
            head = f"costs measured on {count(m.stages, 'stage')} ({how})"
            if self.model is not None:  # two sources: say which number comes from which
                head += f"; memory of model {self.model.name}, not the measured one"
            head += sharing_note(m, ranks, self.processors)
        elif self.model is None:
            head = f"uniform costs {costs} per rank share (time unit: {unit_meaning(self.F, True)})"
        else:
            hw = self.hardware
            head = (
                f"model {self.model.name} (L={self.model.layers}, h={self.model.hidden}, "
                f"s={self.model.seq}, {f'b={self.model.mbs}, ' * mbs}tp={self.model.tp}) on "
                f"{hw.name} at {hw.peak_tflops:g} TFLOP/s x {self.efficiency:g}; {costs} "
                "x forward FLOP time"
            )
        if self.stage_weights:
            head += "; stage weights " + ",".join(fmt_exact(w) for w in self.stage_weights)
        if self.processors is not None:
            head += "; " + processors_meaning(self.processors, ranks)
        if self.comm_model == "latency":
            head += "; messages timed as latency on the dependency (comm model latency)"
        if self.free_comm and not (self.measured is not None and self.measured.post_time()):
            return head + "; free communication"
        seconds = self.time_unit == "s"
        if self.measured is not None and self.ranks_per_node is None:  # one measured link
            us = float(self.intra.latency) * 1e6
            return head + f"; a message between ranks {us:.3g} us (measured in the run)"
        return (
            head + f"; comm {ranks_per_node_words(self, dps)}, "
            f"intra {_link(self.intra, seconds)}, "
            f"inter {_link(self.inter, seconds)}"
        )


def default_op_costs() -> dict[str, Fraction]:
    """The default cost of each op kind in forwards of a rank share (F=1, B=2, I=1, W=1):
    :class:`CostConfig`'s own defaults, for the places that need them without a config
    (synth's list scheduler, sweep's report)."""
    return {k: getattr(CostConfig, k) for k in ("F", "B", "I", "W")}


def _link(link: Link, seconds: bool) -> str:
    """A link's cost: its latency in forwards of a rank share, or (``seconds``) in us."""
    if link.bandwidth is None:
        us = f"{float(link.latency) * 1e6:.3g} us"
        return f"latency {us if seconds else fmt_exact(link.latency)}"
    return f"{float(link.latency) * 1e6:g} us + bytes / {link.bandwidth / 1e9:g} GB/s"


def make_config(data: dict | None = None, where: str = "cost config") -> CostConfig:
    """The :class:`CostConfig` of the cost file's sections (a dict; else a TypeError)."""
    if data is not None and not isinstance(data, dict):  # {"comm": {"latency": "0.25"}}
        raise TypeError(f"make_config takes a dict of the cost file's sections, got {data!r:.40}")
    data = data or {}
    _check_keys(data, where)
    costs, msec, hsec, csec = (data.get(k, {}) for k in ("costs", "model", "hardware", "comm"))
    kw: dict = {}
    for k in ("F", "B", "I", "W", "FB"):
        if k in costs:
            kw[k] = _number(costs[k], f"costs.{k}", where, minimum=0)
    if "stage_weights" in costs:
        ws = costs["stage_weights"]
        if not isinstance(ws, list) or not ws:
            raise error(
                "bad-config",
                f"{where}: costs.stage_weights must be a list of numbers, one per stage",
            )
        kw["stage_weights"] = tuple(
            _number(w, "costs.stage_weights", where, minimum=0, strict=True) for w in ws
        )
    model, cli = None, where != "cost config"  # a command names its settings: its words
    if msec:
        if not isinstance(preset := msec.get("preset", ""), str):  # as hardware.preset's
            raise error("bad-config", f"{where}: model.preset must be a name, got {preset!r}")
        fields = {k: v for k, v in msec.items() if k not in ("preset", "recompute", "stage_layers")}
        model = make_model(msec.get("preset"), cli=cli, **fields)
        kw["recompute"] = msec.get("recompute", "none")
        check_recompute(kw["recompute"])
        kw["stage_layers"] = stage_layers_setting(msec, where)
    if "measured" in data:
        return measured_config(data, kw, model, where)
    for key in ("ranks_per_node", "gpus_per_node"):
        if key in hsec:
            kw[key] = positive_count(hsec[key], f"hardware.{key}", where)
    kw["processors"] = processors_setting(hsec, where) or None
    free = csec.get("free", False)
    if not isinstance(free, bool):
        raise error("bad-config", f"{where}: comm.free must be true or false, got {free!r}")
    cm = csec.get("model", "rendezvous")
    if cm not in COMM_MODELS:
        raise error(
            "bad-config",
            f"{where}: comm.model must be one of {', '.join(COMM_MODELS)}, got {cm!r}",
            hints=did_you_mean(str(cm), COMM_MODELS),
        )
    kw["comm_model"] = cm
    hw = _hardware(hsec.get("preset", "H100"), where)
    if model is None:
        for k in ("preset", "peak_tflops", "efficiency"):
            if k in hsec:
                raise error(
                    "bad-config",
                    f"{where}: hardware.{k} needs a model: op times come from the model's FLOPs",
                    hints=[model_hint(cli)],
                )
        for k in (
            "intra_latency_us",
            "inter_latency_us",
            "intra_bandwidth_gbs",
            "inter_bandwidth_gbs",
        ):
            if k in csec:
                raise error(
                    "bad-config",
                    f"{where}: comm.{k} needs a model (message sizes and "
                    "times in seconds); without one use comm.latency in time units",
                )
        lat = _number(csec.get("latency", 0), "comm.latency", where, minimum=0)
        inter = _number(csec.get("inter_latency", lat), "comm.inter_latency", where, minimum=0)
        if not free:
            kw["intra"], kw["inter"] = Link(lat), Link(inter)
        return CostConfig(model=None, **kw)
    for k in ("latency", "inter_latency"):
        if k in csec:
            raise error(
                "bad-config",
                f"{where}: comm.{k} is in time units, which only apply without a model",
                hints=[
                    f"use comm.{'intra_' if k == 'latency' else ''}"
                    f"{k}_us (microseconds) with a model"
                ],
            )
    eff = float(
        _number(
            hsec.get("efficiency", DEFAULT_EFFICIENCY),
            "hardware.efficiency",
            where,
            minimum=0,
            strict=True,
        )
    )
    if eff > 1:
        raise error(
            "bad-config",
            f"{where}: hardware.efficiency is a fraction of peak in (0, 1], got {eff:g}",
        )
    peak = float(
        _number(
            hsec.get("peak_tflops", hw.peak_tflops),
            "hardware.peak_tflops",
            where,
            minimum=0,
            strict=True,
        )
    )
    hw = replace(hw, peak_tflops=peak)
    if not free:
        kw["intra"] = _seconds_link(csec, "intra", hw.intra_latency, hw.intra_bandwidth_gbs, where)
        kw["inter"] = _seconds_link(csec, "inter", hw.inter_latency, hw.inter_bandwidth_gbs, where)
    return CostConfig(model=model, hardware=hw, efficiency=eff, **kw)


def positive_count(n, key: str, where: str) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise error("bad-config", f"{where}: {key} must be a positive integer, got {n!r}")
    return n


def processors_setting(table: dict, where: str, section: str = "hardware") -> int | None:
    """``processors`` of ``table`` (``[hardware]``, or a profile's ``[measured]``): a whole
    number, 0 meaning a processor per rank (which overrides a profile's), or None when
    absent."""
    n = table.get("processors")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
        raise error(
            "bad-config",
            f"{where}: {section}.processors must be a whole number, 0 or more (how many "
            f"processors the ranks share; 0: one per rank), got {n!r}",
        )
    return n


def _seconds_link(csec: dict, which: str, latency: float, gbs: float, where: str) -> Link:
    lat_us = _number(
        csec.get(f"{which}_latency_us", latency * 1e6), f"comm.{which}_latency_us", where, minimum=0
    )
    bw = _number(
        csec.get(f"{which}_bandwidth_gbs", gbs),
        f"comm.{which}_bandwidth_gbs",
        where,
        minimum=0,
        strict=True,
    )
    return Link(float(lat_us) * 1e-6, float(bw) * 1e9)


def _hardware(name, where: str) -> Hardware:
    if not isinstance(name, str):
        raise error("bad-config", f"{where}: hardware.preset must be a name, got {name!r}")
    for key, hw in HARDWARE.items():
        if key.lower() == name.lower():
            return hw
    raise error(
        "unknown-hardware",
        f"unknown hardware preset '{name}'",
        hints=did_you_mean(name.upper(), HARDWARE) + [f"presets: {', '.join(HARDWARE)}"],
    )


def _check_keys(data: dict, where: str) -> None:
    for sec, table in data.items():
        if sec not in SECTIONS:
            raise error(
                "bad-config",
                f"{where}: unknown section [{sec}]",
                hints=did_you_mean(sec, SECTIONS) + [f"sections: {', '.join(SECTIONS)}"],
            )
        if not isinstance(table, dict):
            raise error("bad-config", f"{where}: [{sec}] must be a table of key = value lines")
        for k in table:
            if k not in SECTIONS[sec]:
                keys = sorted(SECTIONS[sec])
                raise error(
                    "bad-config",
                    f"{where}: unknown key '{k}' in [{sec}]",
                    hints=did_you_mean(k, keys) + [f"keys: {', '.join(keys)}"],
                )


_SMALLEST, _LARGEST = Fraction(1, 10**18), Fraction(10**18)


def _number(v, key: str, where: str, *, minimum=None, strict: bool = False) -> Fraction:
    """A non-bool number as an exact Fraction (floats through their shortest repr)."""
    try:
        if isinstance(v, bool) or not isinstance(v, (int, float, str, Fraction)):
            raise ValueError
        x = Fraction(str(v).strip())
    except (ValueError, ZeroDivisionError):
        raise error("bad-config", f"{where}: {key} must be a number, got {v!r}") from None
    if x and not _SMALLEST <= abs(x) <= _LARGEST:  # times are divided and summed as floats
        s = str(v) if len(str(v)) <= 40 else f"{str(v)[:20]}... ({len(str(v))} characters)"
        raise error("bad-config", f"{where}: {key} must be 0 or 1e-18..1e18 in magnitude, got {s}")
    if minimum is not None and (x < minimum or (strict and x == minimum)):
        rel = "positive" if strict and minimum == 0 else f">= {minimum}"
        raise error("bad-config", f"{where}: {key} must be {rel}, got {v}")
    return x
