"""Transformer model shapes and the sizes analyses need: parameters, activations, messages, FLOPs.

Contract
--------
* :class:`ModelShape` is a small frozen dataclass shared by the memory analyses
  (:mod:`ppir.analysis.memory`, :mod:`ppir.analysis.footprint`) and the cost model: every field is
  a plain ``int`` or ``str``, validated on construction (a ppir diagnostic, exit 2, names the
  first bad field).  It describes one tensor-parallel group of a dense decoder-only transformer
  (pre-norm, rotary or no position embedding); mixture-of-experts layers are not modelled.
* Notation: ``s`` sequence, ``b`` micro-batch size, ``h`` hidden, ``a`` heads, ``g`` key/value
  heads (``kv_heads``; 0 = ``a``, multi-head attention), ``f`` FFN hidden (``ffn``; 0 = 4h),
  ``V`` the vocabulary as given (Megatron-LM pads it to a multiple of 128·tp: give that size to
  match it), ``t`` tensor-parallel size, ``d`` bytes per element of ``dtype``.  Tensor
  parallelism is Megatron's with sequence parallelism, so activations are divided by ``t``.
* Parameters of one layer: ``2h² + 2h·(h·g/a)`` attention, ``2hf`` (``3hf`` with SwiGLU) MLP,
  both split over ``t``; ``2h`` per norm (``h`` for RMSNorm), two norms, replicated.  The first
  stage adds the word embedding ``V·h`` (split over ``t``), the last the final norm and the
  output layer ``V·h`` (the embedding's copy when ``tied`` and the stage is on another rank).
* Activations of one layer and microbatch (:meth:`ModelShape.activation_terms`), the tensors
  autograd keeps, generalising Korthikanti et al. (MLSys'23, Table 2; ``34sbh + 5as²b`` at 16
  bits, MHA, GeLU, dropout): norm inputs (or ``norm_tensors`` tensors of width ``h`` per norm
  written out as elementwise ops: 2 for HF's ``LlamaRMSNorm`` in fp32, its input and normalised
  input; 3 in bf16, whose fp32 copy of the input counts twice), linear inputs, Q, K, V, the
  GeLU/SwiGLU input (or ``act_tensors`` tensors of width ``f`` for an activation written out as
  elementwise ops: 4 for HF GPT-2's ``gelu_new``, 3 for HF Llama's SwiGLU, the gate, its SiLU
  and the up projection), one-byte dropout masks; the attention scores
  ``a·s²·b·(2d + 1)`` without flash attention, or the log-sum-exp ``4·a·s·b`` (fp32) with it;
  none of those under selective recomputation; only the layer input ``s·b·h·d`` under full
  recomputation.
* A point-to-point message between stages carries one boundary activation: ``s·b·h·d/t`` bytes.
* Forward FLOPs of one layer (Megatron-LM's ``num_floating_point_operations``, forward third):
  ``2sb·(2h² + 2h·h·g/a + 2hf or 3hf)`` plus the attention core ``4bs²h``, halved for the causal
  mask when flash attention skips the masked blocks.  The head adds ``2sbhV`` on the last stage.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from fractions import Fraction

from ppir.analysis.layout import divisors
from ppir.diagnostics import did_you_mean, error

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}
RECOMPUTE_MODES = ("none", "selective", "full")
NORMS = ("layernorm", "rmsnorm")
OPTIMIZERS = ("adam", "sgd")
_FLAGS = ("swiglu", "tied", "flash", "dropout")


@dataclass(frozen=True)
class ModelShape:
    """A transformer's shape and training setup as the pipeline sees it (see the module doc).

    ``ffn`` = 0 means 4*hidden, ``kv_heads`` = 0 means ``heads``, ``vocab`` = 0 leaves the
    embedding and the head out.  ``dp`` and ``zero`` (0, 1 = optimizer state sharded over the
    data-parallel group as Megatron's distributed optimizer does, 2 = gradients too) size the
    optimizer state; ``optimizer`` (adam: two fp32 moments, sgd: one momentum) and
    ``grad_dtype`` (the gradient accumulation buffer) complete the per-parameter bytes; a
    16-bit ``dtype`` adds an fp32 master copy.
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
    kv_heads: int = 0
    vocab: int = 0
    swiglu: int = 0
    tied: int = 1
    dp: int = 1
    zero: int = 0
    flash: int = 1
    dropout: int = 1
    norm: str = "layernorm"
    optimizer: str = "adam"
    grad_dtype: str = "fp32"
    act_tensors: int = 0
    norm_tensors: int = 0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise a ppir error (exit 2) naming the first bad field."""
        for f in ("layers", "hidden", "heads", "seq", "mbs", "tp", "dp"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise self._bad(f"{f} must be a positive integer, got {v!r}")
        for f, what in (
            ("ffn", "0 = 4*hidden"),
            ("kv_heads", "0 = heads"),
            ("vocab", "0 = none"),
            ("act_tensors", "0 = the activation function's input"),
            ("norm_tensors", "0 = the norm's input"),
        ):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise self._bad(f"{f} must be a non-negative integer ({what}), got {v!r}")
        for f in _FLAGS:
            if getattr(self, f) not in (0, 1):
                raise self._bad(f"{f} must be 0 or 1, got {getattr(self, f)!r}")
        if self.zero not in (0, 1, 2):
            raise self._bad(
                f"zero must be 0, 1 (optimizer state sharded over dp) or 2 (gradients too), "
                f"got {self.zero!r}"
            )
        if self.hidden % self.heads:
            raise self._bad(
                f"heads ({self.heads}) must divide hidden ({self.hidden})",
                hints=[f"heads that divide {self.hidden}: {_near(self.hidden, self.heads)}"],
            )
        if self.heads % self.tp:
            raise self._bad(f"tensor-parallel size tp={self.tp} must divide heads ({self.heads})")
        if self.heads % self.kv:
            raise self._bad(f"kv_heads ({self.kv}) must divide heads ({self.heads})")
        if self.kv % self.tp:
            raise self._bad(
                f"tensor-parallel size tp={self.tp} must divide kv_heads ({self.kv})",
                hints=["Megatron-LM splits the key/value heads over the tensor-parallel ranks"],
            )
        for f, choices in (
            ("dtype", DTYPE_BYTES),
            ("grad_dtype", DTYPE_BYTES),
            ("norm", NORMS),
            ("optimizer", OPTIMIZERS),
        ):
            v = getattr(self, f)
            if v not in choices:
                raise self._bad(
                    f"unknown {f} '{v}'",
                    hints=did_you_mean(str(v), choices) + [f"{f}: {', '.join(choices)}"],
                )

    def _bad(self, message: str, hints=()):
        return error("bad-model", f"model {self.name}: {message}", hints=hints)

    # ------------------------------------------------------------------ derived sizes
    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def ffn_hidden(self) -> int:
        return self.ffn or 4 * self.hidden

    @property
    def act_kept(self) -> int:
        """Tensors of the FFN width (``f``) the activation function keeps for backward besides
        fc2's input: ``act_tensors``, or by default its input (1 for GeLU, 2 for SwiGLU's gate
        and up, as fused kernels keep them)."""
        return self.act_tensors or (2 if self.swiglu else 1)

    @property
    def norm_kept(self) -> int:
        """Tensors of the hidden width a norm keeps: ``norm_tensors``, else its input."""
        return self.norm_tensors or 1

    @property
    def kv(self) -> int:
        """Key/value heads (grouped-query attention; = heads for multi-head attention)."""
        return self.kv_heads or self.heads

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V): kv heads times the head dimension."""
        return self.kv * (self.hidden // self.heads)

    @property
    def norm_size(self) -> int:
        """Parameters per hidden unit of one norm: 2 for LayerNorm (weight, bias), 1 for RMSNorm."""
        return 2 if self.norm == "layernorm" else 1

    # ------------------------------------------------------------------ parameters (elements)
    def layer_params(self) -> tuple[int, int]:
        """(tensor-parallel-sharded, replicated) parameters of one transformer layer, whole TP
        group: attention and MLP matrices (no biases), and the two norms."""
        h, f = self.hidden, self.ffn_hidden
        sharded = 2 * h * h + 2 * h * self.kv_dim + (3 if self.swiglu else 2) * h * f
        return sharded, 2 * h * self.norm_size

    def embedding_params(self) -> int:
        """The word embedding (= an untied output layer): V·h, whole TP group."""
        return self.vocab * self.hidden

    def final_norm_params(self) -> int:
        return self.norm_size * self.hidden if self.vocab else 0

    # ------------------------------------------------------------------ activations (bytes)
    def activation_terms(self, recompute: str = "none") -> tuple[int, int]:
        """Bytes one layer keeps for one microbatch at t=1: (the linear part, the attention-core
        part) -- the core part is the scores or the log-sum-exp that I frees first under split
        backward (see :func:`ppir.analysis.memory.split_fractions`)."""
        check_recompute(recompute)
        s, b, h, a, d = self.seq, self.mbs, self.hidden, self.heads, self.dtype_bytes
        sb = s * b
        if recompute == "full":
            return (sb * h * d, 0)
        f, mask = self.ffn_hidden, self.dropout
        lin = (
            2 * self.norm_kept * h * d  # what the two norms keep (their inputs, fused)
            + (3 * h + 2 * self.kv_dim) * d  # QKV input, Q, K, V, output-projection input
            + (h + self.act_kept * f + f) * d  # fc1 input, what the activation keeps, fc2 input
            + 2 * h * mask  # the two dropout masks
        )
        if recompute == "selective":
            core = 0
        elif self.flash:
            core = 4 * a  # fp32 log-sum-exp per head and token
        else:
            core = a * s * ((2 if mask else 1) * d + mask)  # softmax out, dropout mask and out
        return (sb * lin, sb * core)

    def activation_bytes_per_layer(self, recompute: str = "none") -> Fraction:
        """Activations one layer keeps for one microbatch, in bytes, on one TP rank."""
        lin, core = self.activation_terms(recompute)
        return Fraction(lin + core, self.tp)

    def embedding_activation_bytes(self) -> Fraction:
        """What the first stage keeps per microbatch besides its layers: the int64 token ids
        (every TP rank holds all of them) and the embedding dropout mask."""
        if not self.vocab:
            return Fraction(0)
        sb = self.seq * self.mbs
        return 8 * sb + Fraction(sb * self.hidden * self.dropout, self.tp)

    def head_activation_bytes(self) -> Fraction:
        """What the last stage keeps per microbatch besides its layers: what the final norm
        keeps (its input, fused), its output and the fp32 logits of the loss (Megatron-LM's
        ``4sbh(1 + V/h)`` at 16 bits)."""
        if not self.vocab:
            return Fraction(0)
        sb, norm = self.seq * self.mbs, self.norm_kept + 1
        return Fraction(sb * (norm * self.hidden * self.dtype_bytes + 4 * self.vocab), self.tp)

    def message_bytes(self) -> Fraction:
        """Bytes of one stage-boundary activation (or its gradient) for one microbatch."""
        return Fraction(self.seq * self.mbs * self.hidden * self.dtype_bytes, self.tp)

    # ------------------------------------------------------------------ FLOPs (whole TP group)
    def forward_flops_per_layer(self) -> int:
        """Forward FLOPs of one layer for one microbatch (divide by tp per GPU)."""
        s, b, h = self.seq, self.mbs, self.hidden
        linear = 2 * h * h + 2 * h * self.kv_dim + (3 if self.swiglu else 2) * h * self.ffn_hidden
        core = (2 if self.flash else 4) * b * s * s * h
        return 2 * s * b * linear + core

    def recompute_share(self, recompute: str) -> Fraction:
        """The share of a layer's forward that the backward runs again: 1 under full
        recomputation, the attention core (scores, softmax, values) under selective, 0 under
        none.  Exact rationals, so unit-mode timings stay exact."""
        check_recompute(recompute)
        if recompute == "none":
            return Fraction(0)
        if recompute == "full":
            return Fraction(1)
        s, b, h = self.seq, self.mbs, self.hidden
        return Fraction((2 if self.flash else 4) * b * s * s * h, self.forward_flops_per_layer())

    def head_forward_flops(self) -> int:
        """Forward FLOPs of the output layer (logits) for one microbatch."""
        return 2 * self.seq * self.mbs * self.hidden * self.vocab

    def stage_forward_flops(self, layers: int, last: bool) -> int:
        """Forward FLOPs of a stage of ``layers`` layers (the head too when ``last``)."""
        return layers * self.forward_flops_per_layer() + (self.head_forward_flops() if last else 0)


# Sources: GPT-3 175B: Brown et al. 2020, Table 2.1, and Megatron-LM examples/gpt3/
# train_gpt3_175b_distributed.sh (96 layers, 12288 hidden, 96 heads, 2048 tokens; GPT-2 BPE
# vocabulary of 50257, tied embeddings).  Llama 3 8B / 70B and Llama 3.1 405B: Dubey et al. 2024
# ("The Llama 3 Herd of Models"), Table 3, and the meta-llama config.json files (hidden_size,
# intermediate_size, num_attention_heads, num_key_value_heads = 8, vocab_size 128256,
# tie_word_embeddings false, RMSNorm, SwiGLU, no dropout; pre-trained at 8192 tokens).  GPT-2 XL:
# Radford et al. 2019, Table 2 (48 layers, 1600 hidden, 1024 tokens; 25 heads per the
# openai-community/gpt2-xl config.json).  Both GPTs were trained before FlashAttention: their
# presets keep the attention scores (flash=0; override with flash=1).
_LLAMA = dict(swiglu=1, tied=0, norm="rmsnorm", dropout=0, kv_heads=8, vocab=128256, seq=8192)
PRESETS: dict[str, ModelShape] = {
    "gpt3-175b": ModelShape(
        "gpt3-175b", layers=96, hidden=12288, heads=96, seq=2048, vocab=50257, flash=0
    ),
    "llama3-8b": ModelShape("llama3-8b", layers=32, hidden=4096, heads=32, ffn=14336, **_LLAMA),
    "llama3-70b": ModelShape("llama3-70b", layers=80, hidden=8192, heads=64, ffn=28672, **_LLAMA),
    "llama3-405b": ModelShape(
        "llama3-405b", layers=126, hidden=16384, heads=128, ffn=53248, **_LLAMA
    ),
    "gpt2-xl": ModelShape(
        "gpt2-xl", layers=48, hidden=1600, heads=25, seq=1024, vocab=50257, flash=0
    ),
}

STR_FIELDS = ("name", "dtype", "norm", "optimizer", "grad_dtype")
SPEC_FIELDS = tuple(f.name for f in fields(ModelShape) if f.name != "name")
_INT_FIELDS = {f for f in SPEC_FIELDS if f not in STR_FIELDS}
_KEYS = sorted(SPEC_FIELDS)
PAPER_NAMES = {"L": "layers", "h": "hidden", "s": "seq", "b": "mbs", "a": "heads", "t": "tp"}
"""The letters of Megatron's memory and FLOP formulas, as the assumptions line prints them."""


def check_recompute(mode: str) -> None:
    """A ``bad-model`` error unless ``mode`` is one of :data:`RECOMPUTE_MODES` (a value of
    another type, ``recompute=1`` or ``recompute = true`` in a cost file, is named too)."""
    if not isinstance(mode, str):
        raise error(
            "bad-model",
            f"recompute takes a mode name, got {type(mode).__name__} {mode!r:.40}",
            hints=[f"modes: {', '.join(RECOMPUTE_MODES)}"],
        )
    if mode not in RECOMPUTE_MODES:
        raise error(
            "bad-model",
            f"unknown recompute mode '{mode}'",
            hints=did_you_mean(mode, RECOMPUTE_MODES) + [f"modes: {', '.join(RECOMPUTE_MODES)}"],
        )


def make_model(preset: str | None = None, *, cli: bool = False, **overrides) -> ModelShape:
    """A preset (or the defaults) with fields overridden; ppir errors for unknown names, whose
    hints are in the library's words (``ppir.analysis.models.PRESETS``, ``ppir.make_config``),
    or with ``cli`` the command line's (``ppir profile``, ``--config``)."""
    if preset is not None and preset not in PRESETS:
        file = preset.endswith(".py") or "/" in preset  # a model module, not a preset
        if cli:
            where = "presets"
            own = f"ppir profile --module {preset} -o costs.toml, then --config costs.toml"
        else:
            where = "presets (ppir.analysis.models.PRESETS)"
            own = (
                f"'ppir profile --module {preset} -o costs.toml' writes a cost file; compile "
                "with costs=ppir.make_config(tomllib.load(open('costs.toml', 'rb')))"
            )
        raise error(
            "unknown-model",
            f"unknown model preset '{preset}'",
            hints=did_you_mean(preset, PRESETS)
            + [f"{where}: {', '.join(PRESETS)}"]
            + ([f"to use your own model's costs, measure them: {own}"] if file else []),
        )
    base = PRESETS[preset] if preset else ModelShape()
    for k in overrides:
        if k not in _KEYS:
            paper = PAPER_NAMES.get(k)  # 'b' of the assumptions line's (L=32, ..., b=1)
            raise error(
                "bad-model",
                f"unknown model field '{k}'",
                hints=([f"'{k}' is the formulas' letter: the field is {paper}="] if paper else [])
                + did_you_mean(k, _KEYS)
                + [f"fields: {', '.join(_KEYS)}"],
            )
    return replace(base, **overrides)


def model_hint(cli: bool) -> str:
    """The hint where a setting needs a model: in a command's words (``--model``, a --config
    file's [model] table) or, without ``cli``, the library's (``ppir.make_config``'s dict)."""
    if cli:
        return "add --model PRESET (or a [model] table in --config), e.g. --model llama3-8b"
    return "add a 'model' table, e.g. ppir.make_config({'model': {'preset': 'llama3-8b'}, ...})"


def model_fields(m: ModelShape) -> dict:
    """The spec fields of ``m`` (everything but the name), e.g. for a config ``[model]`` table."""
    return {f: getattr(m, f) for f in SPEC_FIELDS}


def _near(n: int, near: int) -> str:
    """The 8 divisors of ``n`` closest to ``near`` by ratio, ascending: head counts to suggest."""
    closest = sorted(divisors(n), key=lambda d: max(d / near, near / d))[:8]
    return ", ".join(map(str, sorted(closest)))
