"""Transformer model shapes, and the per-layer sizes analyses need (activations, messages, FLOPs).

Contract
--------
* :class:`ModelShape` is a small frozen dataclass shared by the memory analysis
  (:mod:`ppir.analysis.memory`) and the cost model: every field is a plain ``int`` or ``str``,
  validated on construction (:meth:`ModelShape.validate` raises a ppir diagnostic, exit 2, for bad
  values).
* Sizes follow Korthikanti et al. (MLSys'23), per transformer layer and per microbatch, with
  ``s`` sequence length, ``b`` micro-batch size, ``h`` hidden size, ``a`` heads, ``t``
  tensor-parallel size (tensor *and* sequence parallel, so every term is divided by ``t``)::

      none       s*b*h*(34 + 5*a*s/h) / t    bytes at 16 bits
      selective  s*b*h*34 / t                (the 5*a*s/h attention term is recomputed)
      full       s*b*h*2 / t                 (only each layer's input is kept)

  Other dtypes scale these by ``dtype_bytes / 2``.  Embedding and output layers are left out.
* A point-to-point message between stages carries one boundary activation: ``s*b*h*dtype_bytes/t``
  bytes (sequence parallel: each tensor-parallel rank sends its shard).
* Forward FLOPs per layer: ``2*b*s*(4*h*h + 2*h*ffn) + 4*b*s*s*h`` (ffn defaults to 4h, giving the
  familiar ``24*b*s*h^2 + 4*b*s^2*h``).  Grouped-query attention is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from fractions import Fraction

from ppir.diagnostics import did_you_mean, error

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}
RECOMPUTE_MODES = ("none", "selective", "full")


@dataclass(frozen=True)
class ModelShape:
    """A transformer's shape as the pipeline sees it (one tensor-parallel group).

    ``ffn`` = 0 means 4*hidden.  Construct through :func:`make_model` or :func:`parse_model_spec`
    to get validation with ppir diagnostics; direct construction validates too.
    """

    name: str = "custom"
    layers: int = 24
    hidden: int = 2048
    heads: int = 16
    seq: int = 2048
    mbs: int = 1
    dtype: str = "bf16"
    tp: int = 1
    ffn: int = 0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise a ppir error (exit 2) naming the first bad field."""
        for f in ("layers", "hidden", "heads", "seq", "mbs", "tp"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise error(
                    "bad-model", f"model {self.name}: {f} must be a positive integer, got {v!r}"
                )
        if not isinstance(self.ffn, int) or self.ffn < 0:
            raise error(
                "bad-model",
                f"model {self.name}: ffn must be a non-negative integer "
                f"(0 = 4*hidden), got {self.ffn!r}",
            )
        if self.hidden % self.heads:
            raise error(
                "bad-model",
                f"model {self.name}: heads ({self.heads}) must divide hidden ({self.hidden})",
                hints=[
                    f"heads that divide {self.hidden}: "
                    + ", ".join(str(d) for d in _divisors(self.hidden)[-8:])
                ],
            )
        if self.heads % self.tp:
            raise error(
                "bad-model",
                f"model {self.name}: tensor-parallel size tp={self.tp} must "
                f"divide heads ({self.heads})",
            )
        if self.dtype not in DTYPE_BYTES:
            raise error(
                "bad-model",
                f"model {self.name}: unknown dtype '{self.dtype}'",
                hints=did_you_mean(self.dtype, DTYPE_BYTES) + [f"dtypes: {', '.join(DTYPE_BYTES)}"],
            )

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def ffn_hidden(self) -> int:
        return self.ffn or 4 * self.hidden

    def activation_terms(self, recompute: str = "none") -> tuple[int, int]:
        """Per layer and microbatch at 16 bits and t=1: (the 34h-like part, the 5as part) times
        s*b, so that ``sum / t * dtype_bytes / 2`` is the bytes.  Split backward frees them
        separately (see :func:`ppir.analysis.memory.split_fractions`)."""
        s, b, h, a = self.seq, self.mbs, self.hidden, self.heads
        check_recompute(recompute)
        if recompute == "full":
            return (2 * s * b * h, 0)
        attn = 0 if recompute == "selective" else 5 * a * s * s * b
        return (34 * s * b * h, attn)

    def activation_bytes_per_layer(self, recompute: str = "none") -> Fraction:
        """Korthikanti et al.'s activations of one layer for one microbatch, in bytes."""
        lin, attn = self.activation_terms(recompute)
        return Fraction((lin + attn) * self.dtype_bytes, 2 * self.tp)

    def message_bytes(self) -> Fraction:
        """Bytes of one stage-boundary activation (or its gradient) for one microbatch."""
        return Fraction(self.seq * self.mbs * self.hidden * self.dtype_bytes, self.tp)

    def forward_flops_per_layer(self) -> int:
        """Forward FLOPs of one layer for one microbatch (whole TP group; divide by tp per GPU)."""
        s, b, h = self.seq, self.mbs, self.hidden
        return 2 * b * s * (4 * h * h + 2 * h * self.ffn_hidden) + 4 * b * s * s * h


PRESETS: dict[str, ModelShape] = {
    "gpt3-175b": ModelShape("gpt3-175b", layers=96, hidden=12288, heads=96, seq=2048),
    "llama3-8b": ModelShape("llama3-8b", layers=32, hidden=4096, heads=32, seq=8192, ffn=14336),
    "llama3-70b": ModelShape("llama3-70b", layers=80, hidden=8192, heads=64, seq=8192, ffn=28672),
    "llama3-405b": ModelShape(
        "llama3-405b", layers=126, hidden=16384, heads=128, seq=8192, ffn=53248
    ),
    "gpt2-xl": ModelShape("gpt2-xl", layers=48, hidden=1600, heads=25, seq=1024),
}

_INT_FIELDS = {f.name for f in fields(ModelShape)} - {"name", "dtype"}
_KEYS = sorted(_INT_FIELDS | {"dtype"})


def check_recompute(mode: str) -> None:
    if mode not in RECOMPUTE_MODES:
        raise error(
            "bad-model",
            f"unknown recompute mode '{mode}'",
            hints=did_you_mean(mode, RECOMPUTE_MODES) + [f"modes: {', '.join(RECOMPUTE_MODES)}"],
        )


def make_model(preset: str | None = None, **overrides) -> ModelShape:
    """A preset (or the defaults) with fields overridden; ppir errors for unknown names."""
    if preset is not None and preset not in PRESETS:
        raise error(
            "unknown-model",
            f"unknown model preset '{preset}'",
            hints=did_you_mean(preset, PRESETS) + [f"presets: {', '.join(PRESETS)}"],
        )
    base = PRESETS[preset] if preset else ModelShape()
    for k in overrides:
        if k not in _KEYS:
            raise error(
                "bad-model",
                f"unknown model field '{k}'",
                hints=did_you_mean(k, _KEYS) + [f"fields: {', '.join(_KEYS)}"],
            )
    return replace(base, **overrides)


def parse_model_spec(text: str) -> ModelShape:
    """Parse ``--model`` text: ``PRESET``, ``PRESET,key=value,...`` or ``key=value,...``.

    Keys are the :class:`ModelShape` fields (layers, hidden, heads, seq, mbs, dtype, tp, ffn).
    """
    preset = None
    over: dict = {}
    for i, part in enumerate(p.strip() for p in text.split(",")):
        if not part:
            continue
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq:
            if i == 0:
                preset = key
                continue
            raise error("bad-model", f"--model {text}: expected key=value, got '{part}'")
        if key in _INT_FIELDS:
            try:
                over[key] = int(value)
            except ValueError:
                raise error(
                    "bad-model", f"--model {text}: {key} must be an integer, got {value!r}"
                ) from None
        else:
            over[key] = value.strip()
    return make_model(preset, **over)


def valid_chunk_counts(layers: int, ranks: int, limit: int | None = None) -> list[int]:
    """The v for which ``layers`` splits evenly into ranks*v chunks."""
    if layers % ranks:
        return []
    return [v for v in _divisors(layers // ranks) if limit is None or v <= limit]


def check_layers(layers: int, stages: int, ranks: int) -> int:
    """Layers per stage; a ppir error (exit 2) when ``stages`` does not divide ``layers``."""
    if layers <= 0:
        raise error("bad-model", f"--layers must be a positive integer, got {layers}")
    if layers % stages == 0:
        return layers // stages
    ok = valid_chunk_counts(layers, ranks)
    hint = (
        f"for P={ranks}, v in {{{', '.join(map(str, ok))}}} divides {layers} layers"
        if ok
        else f"{layers} layers are not divisible by P={ranks} for any v"
    )
    v = Fraction(stages, ranks)
    raise error(
        "bad-layers",
        f"{layers} layers do not split evenly into {stages} stages "
        f"(P={ranks}, v={v}): {layers} % {stages} = {layers % stages}",
        hints=[hint],
    )


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]
