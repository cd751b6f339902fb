"""``--model`` text and the config's ``[model]`` table: :func:`parse_model_spec` reads a spec
(``PRESET``, ``PRESET,key=value,...`` or ``key=value,...``) into a
:class:`~ppir.analysis.models.ModelShape`, :func:`model_table` writes a shape back as the table
``--model`` puts in the cost config."""

from __future__ import annotations

import re

from ppir.analysis.models import (
    _FLAGS,
    _INT_FIELDS,
    DTYPE_BYTES,
    NORMS,
    OPTIMIZERS,
    PRESETS,
    SPEC_FIELDS,
    ModelShape,
    make_model,
    model_fields,
)
from ppir.analysis.units import comma_entries
from ppir.diagnostics import PpirError, error, given_twice
from ppir.frontend.limits import int_literal


def model_table(m: ModelShape, recompute: str | None = None) -> dict:
    """The config ``[model]`` table of ``m`` (a preset's name kept as ``preset``), with
    ``recompute`` when given: what ``--model`` and ``--recompute`` put in the cost config."""
    fields = model_fields(m)
    if m.name in PRESETS:
        fields["preset"] = m.name
    if recompute is not None:
        fields["recompute"] = recompute
    return fields


def parse_model_spec(text: str, option: str = "--model") -> ModelShape:
    """Parse ``--model`` text: ``PRESET``, ``PRESET,key=value,...`` or ``key=value,...``.

    Keys are the :class:`ModelShape` fields: layers, hidden, heads, seq, mbs, dtype, tp, ffn,
    kv_heads, vocab, swiglu, tied, dp, zero, flash, dropout, norm, optimizer, grad_dtype,
    act_tensors, norm_tensors.  ``option`` is how errors name the text: the command's
    ``--model`` (``--model llama3-8b,tp=x: tp must be an integer``), or an API argument's name,
    ``model`` (``model 'llama3-8b,tp=x': ...``).
    """
    preset = None
    over: dict = {}
    if not text.strip():
        raise error(
            "bad-model",
            f"{option} needs a preset or key=value pairs, got an empty text",
            hints=[f"presets: {', '.join(PRESETS)}; e.g. {_named(option, 'llama3-8b,seq=4096')}"],
        )
    for i, part in enumerate(comma_entries(text, _named(option, text), "bad-model")):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq:
            if i == 0:
                preset = key
                continue
            raise error("bad-model", f"{_named(option, text)}: expected key=value, got '{part}'")
        if key in _INT_FIELDS:
            v = value.strip()
            digits = v[1:] if v[:1] in ("+", "-") else v
            if not digits.isdigit():
                named = _named(option, text.replace(v, _short(v)))
                raise error(
                    "bad-model",
                    f"{named}: {key} must be an integer, got {_short(v)!r}",
                    hints=_suffix_hint(key, v),
                )
            try:  # ppir's integer limit (docs/language.md)
                n = int_literal(digits, None)
            except PpirError as e:
                raise error("bad-model", f"{option} {key}: {e.diagnostics[0].message}") from None
            n = -n if v.startswith("-") else n
        else:
            n = value.strip()
        if over.get(key, n) != n:
            raise error(
                "bad-model",
                f"{_named(option, text)}: {given_twice(key, over[key], n)}",
                hints=["give each field once"],
            )
        over[key] = n
    return make_model(preset, cli=option.startswith("-"), **over)


def _short(value: str) -> str:
    """A value as written, shortened when long (``99999999...999x (5,001 characters)``): the
    spec around it is named in full."""
    if len(value) <= 24:
        return value
    return f"{value[:8]}...{value[-4:]} ({len(value):,} characters)"


def _suffix_hint(key: str, value: str) -> list[str]:
    """For a count written with a thousands suffix (``seq=8k``, ``vocab=128K``): both readings
    in digits, which the spec takes; else no hint."""
    m = re.fullmatch(r"(\d+)([kK])", value)
    if not m:
        return []
    n = int(m.group(1))
    return [f"write the count in digits: {key}={n * 1000} or {key}={n * 1024}"]


def _named(option: str, text: str) -> str:
    """The spec as the caller gave it: ``--model TEXT`` on the command line, ``model 'TEXT'``
    for an API argument."""
    return f"{option} {text}" if option.startswith("-") else f"{option} '{text}'"


def spec_text(m: ModelShape, omit: tuple[str, ...] = ()) -> str:
    """``m`` as ``--model`` text that :func:`parse_model_spec` reads back as ``m``: its preset's
    name (when it has one) and the fields that differ from that preset (or from the defaults),
    in field order, but those in ``omit`` (given by another flag, e.g. ``dp`` by ``--dp``);
    ``llama3-8b,seq=4096,mbs=2,tp=2``.  A shape with nothing to say is the defaults' fields
    written out in full (an empty spec is refused)."""
    base = PRESETS.get(m.name)
    ref = model_fields(base if base is not None else ModelShape())
    own = model_fields(m)
    changed = [f"{k}={v}" for k, v in own.items() if v != ref[k] and k not in omit]
    head = [m.name] if base is not None else []
    if not head and not changed:  # the defaults: name one field, so the spec is not empty
        changed = [f"layers={m.layers}"]
    return ",".join(head + changed)


def spec_help() -> str:
    """What ``--model`` help texts say a spec's fields are: every :class:`ModelShape` field and
    the flags' and choices' values, read from :mod:`ppir.analysis.models` (a field added there
    is listed here)."""
    return (
        f"fields: {', '.join(SPEC_FIELDS)} (ffn 0: 4 x hidden; kv_heads 0: heads; vocab 0: no "
        f"embedding or head; {', '.join(_FLAGS)}: 0|1; zero: 0|1|2; dtype, grad_dtype: "
        f"{'|'.join(DTYPE_BYTES)}; norm: {'|'.join(NORMS)}; optimizer: {'|'.join(OPTIMIZERS)}; "
        "act_tensors: FFN-wide tensors the activation keeps, 0: its input; norm_tensors: "
        "hidden-wide tensors a norm keeps, 0: its input)"
    )
