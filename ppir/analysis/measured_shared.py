"""Parameters several measured stages share (a tied embedding and head), from ``ppir profile``:
the ``shared`` key of a ``[measured]`` table (no torch needed).

Every stage's ``param_bytes``, ``frozen_bytes`` and ``optimizer_bytes`` count all the
parameters the stage holds, a shared one included, since a stage on a rank of its own holds its
own copy.  Stages on one rank hold one tensor (docs/executor.md, "holders on one rank (a V
placement) are one tensor"), so where a rank, or a merged stage (:meth:`MeasuredCosts.fit`),
holds several holders of one parameter its bytes count once.  Format, one inline table per
shared parameter (``stages``: its holders, measured stage indices; the bytes of its three
terms, each counted in every holder's per-stage figure)::

    shared = [{stages = [0, 3], param_bytes = 4096.0, frozen_bytes = 0.0,
               optimizer_bytes = 8192.0}]

The stages declare what they share as :func:`ppir.torch.split_layers` does
(``stage.ppir_shared``), which the runtime reads too; a sharing the stages do not declare is not
counted here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ppir.diagnostics import error

TERMS = ("param_bytes", "frozen_bytes", "optimizer_bytes")


@dataclass(frozen=True)
class SharedBytes:
    """One parameter held by ``stages`` (at least two), and its bytes per term."""

    stages: tuple[int, ...]
    param_bytes: float = 0.0
    frozen_bytes: float = 0.0
    optimizer_bytes: float = 0.0

    def to_toml(self) -> str:
        terms = ", ".join(f"{k} = {float(getattr(self, k))!r}" for k in TERMS)
        return f"{{stages = [{', '.join(map(str, self.stages))}], {terms}}}"


def overcounted(shared, held) -> dict[str, float]:
    """Per term, the bytes that summing the per-stage figures of the stages ``held`` (one
    holder's tensor) counts more than once: for a parameter with n >= 2 holders among them,
    n - 1 times its bytes."""
    held = set(held)
    out = dict.fromkeys(TERMS, 0.0)
    for e in shared:
        extra = len(held.intersection(e.stages)) - 1
        if extra > 0:
            for k in TERMS:
                out[k] += extra * getattr(e, k)
    return out


def fit_shared(shared, k: int, stages: int) -> tuple[tuple[SharedBytes, ...], list[dict]]:
    """The shared parameters of the model merged into ``stages`` stages of ``k`` measured ones
    each (merged stage s: measured ``s*k .. s*k + k - 1``), and per merged stage the bytes its
    summed figures count twice (:func:`overcounted` of its measured stages)."""
    merged = []
    for e in shared:
        at = sorted({s // k for s in e.stages})
        if len(at) > 1:
            merged.append(SharedBytes(tuple(at), e.param_bytes, e.frozen_bytes, e.optimizer_bytes))
    twice = [overcounted(shared, range(s * k, s * k + k)) for s in range(stages)]
    return tuple(merged), twice


def from_list(v, key: str, where: str, stages: int) -> tuple[SharedBytes, ...]:
    """``v`` (the ``shared`` list of a ``[measured]`` table) checked; a ppir error names the
    entry and what is wrong with it."""
    if not isinstance(v, list):
        raise error("bad-config", f"{where}: {key} must be a list of tables, got {v!r:.40}")
    out = []
    for i, e in enumerate(v):
        at = f"{where}: {key}[{i}]"
        if not isinstance(e, dict):
            raise error(
                "bad-config", f"{at} must be a table {{stages = [...], ...}}, got {e!r:.40}"
            )
        unknown = sorted(set(e) - {"stages", *TERMS})
        if unknown:
            keys = ", ".join(("stages", *TERMS))
            raise error("bad-config", f"{at}: unknown key '{unknown[0]}' (keys: {keys})")
        s = e.get("stages")
        ok = isinstance(s, list) and all(type(x) is int and 0 <= x < stages for x in s)
        if not ok or len(set(s)) != len(s) or len(s) < 2:
            raise error(
                "bad-config",
                f"{at}.stages must list two or more distinct measured stages (0 to "
                f"{stages - 1}), got {s!r:.40}",
            )
        sizes = {}
        for k in TERMS:
            x = e.get(k, 0.0)
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x < math.inf:
                raise error("bad-config", f"{at}.{k} must be bytes >= 0, got {x!r:.40}")
            sizes[k] = float(x)
        out.append(SharedBytes(tuple(sorted(s)), **sizes))
    return tuple(out)
