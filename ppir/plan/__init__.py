"""Execution plans (``ppir.plan/2``): a lowered, verified program as per-rank instructions that
a runtime interprets without scheduling decisions of its own.  Plain JSON data; nothing here
imports torch.

* :mod:`.build` -- :func:`build_plan` and the instruction format (see its docstring);
* :mod:`.validate` -- :func:`validate_plan`: everything a runtime checks before any rank posts
  anything (schema, the plan rebuilt from its IR, verification, digest);
* :mod:`.io` -- :func:`save_plan`, :func:`load_plan`, :func:`plan_digest`.

The runtime that runs plans is :mod:`ppir.torch`; docs/executor.md describes both.
"""

from ppir.plan.build import (
    PLAN_FORMAT,
    PlanError,
    boundary_of,
    build_plan,
    is_evaluation_plan,
    plan_summary,
)
from ppir.plan.io import load_plan, plan_digest, read_plan, save_plan
from ppir.plan.validate import plan_schedule, validate_plan

__all__ = [
    "PLAN_FORMAT",
    "PlanError",
    "boundary_of",
    "build_plan",
    "is_evaluation_plan",
    "load_plan",
    "plan_digest",
    "plan_schedule",
    "plan_summary",
    "read_plan",
    "save_plan",
    "validate_plan",
]
