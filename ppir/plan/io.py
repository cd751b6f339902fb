"""Plan files: writing, reading (validated) and the digest that detects edits."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ppir.plan.build import PlanError

UNSIGNED = ("digest", "meta")
"""Fields the digest does not cover: the digest itself, and the shape metadata the runtime may
fill in (``ppir.run --dump-plan``) and checks against every tensor anyway."""


def plan_digest(plan: dict) -> str:
    """``sha256:HEX`` of the plan's canonical JSON without :data:`UNSIGNED` fields."""
    body = {k: v for k, v in plan.items() if k not in UNSIGNED}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def save_plan(plan: dict, path: str | Path, indent: int | None = 1) -> None:
    """Write the plan as JSON; a ``bad-output`` error naming the path when that fails."""
    from ppir.diagnostics import write_output

    write_output(str(path), json.dumps(plan, indent=indent) + "\n")


def read_plan(path: str | Path) -> dict:
    """The JSON object in a plan file (not validated); PlanError with the path."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise PlanError(
            f"{path}: cannot read the plan: {getattr(e, 'strerror', None) or e}"
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise PlanError(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}") from None


def load_plan(path: str | Path, *, verify: bool = True) -> dict:
    """Read and fully validate a plan file (:func:`ppir.plan.validate.validate_plan`);
    PlanError prefixed with the path on anything unusable."""
    from ppir.plan.validate import validate_plan

    plan = read_plan(path)
    try:
        validate_plan(plan, verify=verify)
    except PlanError as e:
        raise PlanError(f"{path}: {e}") from None
    return plan
