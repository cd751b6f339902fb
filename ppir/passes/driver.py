"""The pass driver: a textual pipeline of passes, applied in order, the program verified after
each (xDSL-style ``-p lower-comms{strategy=eager},overlap-comms``).

Syntax: pass names separated by commas, each optionally followed by ``{name=value ...}``
options (space-separated; the pass's dataclass fields, integers or words).  Costs are not
options: passes that plan with costs (lower-comms) receive the compile's costs.
"""

from __future__ import annotations

import dataclasses
import re

from ppir.diagnostics import did_you_mean, error, given_twice

_PASS_RE = re.compile(r"\s*([a-z][a-z0-9-]*)\s*(?:\{([^{}]*)\})?\s*(?:,|$)")


def parse_pipeline(text: str, registry: dict) -> list:
    """The pass instances named by ``text`` (see the module docstring); a ppir error (exit 2)
    naming the offending pass or option otherwise."""
    out = []
    pos = 0
    text = text.strip()
    if not text:
        raise error("bad-pipeline", "empty pass pipeline", hints=[_known(registry)])
    while pos < len(text):
        m = _PASS_RE.match(text, pos)
        if not m or m.end() == pos:
            raise error(
                "bad-pipeline",
                f"cannot read the pass pipeline at {text[pos:]!r}",
                hints=[
                    "write passes as name{option=value ...},name2, e.g. "
                    "lower-comms{strategy=eager},overlap-comms"
                ],
            )
        name, opts = m.group(1), m.group(2)
        cls = registry.get(name)
        if cls is None:
            raise error(
                "bad-pipeline",
                f"unknown pass '{name}'",
                hints=did_you_mean(name, registry) + [_known(registry)],
            )
        try:
            out.append(cls(**_options(cls, name, opts or "")))
        except ValueError as e:  # an option value the pass refuses
            raise error("bad-pipeline", f"{name}: {e}") from None
        pos = m.end()
    for p in out[1:]:
        if getattr(p, "first", False):
            raise error(
                "bad-pipeline",
                f"{p.name} must come first: it makes a new compute order for the passes after it",
                hints=[f"e.g. {p.name},lower-comms,overlap-comms"],
            )
    return out


def _known(registry: dict) -> str:
    return f"passes: {', '.join(sorted(registry))}"


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _options(cls, name: str, text: str) -> dict:
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "costs"}
    out: dict = {}
    typed: dict[str, str] = {}  # each option's value as written, for one given twice
    for part in text.split():
        key, eq, value = part.partition("=")
        if not eq or key not in fields:
            raise error(
                "bad-pipeline",
                f"{name}: unknown option '{key}'"
                if eq
                else f"{name}: expected name=value, got '{part}'",
                hints=did_you_mean(key, fields) + [f"options of {name}: {', '.join(fields)}"],
            )
        default = fields[key].default
        if "," in value:  # {a=1,b=2} or {a=1, b=2}: options are separated by spaces alone
            raise error(
                "bad-pipeline",
                f"{name}: '{part}' is one option whose value holds a ','",
                hints=[f"separate the options of a pass with spaces: {name}{{a=1 b=2}}"],
            )
        if isinstance(default, bool):
            if value.lower() not in _TRUE + _FALSE:
                raise error(
                    "bad-pipeline",
                    f"{name}: {key} takes true or false, got '{value}'",
                    hints=[f"true: {', '.join(_TRUE)}; false: {', '.join(_FALSE)}"],
                )
            v: object = value.lower() in _TRUE
        elif isinstance(default, int):
            try:
                v = int(value)
            except ValueError:
                raise error(
                    "bad-pipeline", f"{name}: {key} must be an integer, got '{value}'"
                ) from None
        else:
            v = value
        if out.get(key, v) != v:
            raise error(
                "bad-pipeline",
                f"{name}: {given_twice(key, typed[key], value)}",
                hints=[f"give each option of {name} once"],
            )
        out[key], typed[key] = v, value
    return out


def pipeline_text(passes: list) -> str:
    """The textual form of a list of pass instances (round-trips through
    :func:`parse_pipeline`; costs are left out)."""
    parts = []
    for p in passes:
        opts = [
            f"{f.name}={getattr(p, f.name)}"
            for f in dataclasses.fields(p)
            if f.name != "costs" and getattr(p, f.name) != f.default
        ]
        parts.append(p.name + (f"{{{' '.join(opts)}}}" if opts else ""))
    return ",".join(parts)
