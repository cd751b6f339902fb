"""The properties a schedule must have, as one function: :func:`check_schedule`.

For one choice of parameters it expands the schedule, lowers its communication (lockstep unless
the file is already lowered), runs the verifier (completeness, matching, deadlock freedom under
rendezvous semantics) and, when it verifies, checks the optional bounds:

* ``max_peak_activations``: the worst rank's peak in-flight activations, in A (one microbatch's
  activations of one full rank share, :mod:`ppir.analysis.memory`), must not exceed the bound;
* ``max_bubble``: the estimator's bubble/ideal ratio (Narayanan 2021: (P-1)/M for 1F1B) under
  its default textbook costs must not exceed the bound;
* ``max_step_time``: the estimator's step time (F=1, B=2 per rank share) must not exceed it.

A bound is a number, an expression over the schedule's parameters (``"P"``, ``"(P-1)/M"``,
``"P + 1"``; ``ranks``, ``stages`` and ``microbatches`` are also defined), or a callable taking
the parameter dict.  :func:`assert_schedule_ok` raises ``AssertionError`` with the rendered
diagnostics; :func:`check_schedule` returns a :class:`CheckResult` instead.

Usage mistakes (no such file, unknown parameter, syntax error, a bound naming no parameter)
raise :class:`ppir.PpirError`; everything the schedule itself gets wrong is a failed result.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from ppir.diagnostics import PpirError, did_you_mean, error
from ppir.frontend.ast import Module
from ppir.frontend.expand import DEFAULT_MAX_OPS, DEFAULT_MAX_STEPS, expand
from ppir.ir import Schedule
from ppir.testing.space import Expr

Bound = int | float | Fraction | str | Callable[[dict], object] | None
# Expansion errors that mean the caller asked for something unusable, not that the schedule is
# wrong for these parameters.
USAGE_KINDS = frozenset(
    {"bad-input", "bad-usage", "unknown-parameter", "missing-parameter", "bad-define"}
)
# Expansion errors that mean the schedule is not defined for these parameters: a require line
# of a .pps file, or the constraints of a torch:NAME class's constructor (M >= P for 1F1B...).
_UNDEFINED = frozenset({"require-failed", "torch-rejected"})
_TOLERANCE = 1e-9


@dataclass
class CheckResult:
    """The outcome of :func:`check_schedule`.

    ``status`` is ``"ok"``, ``"failed"``, ``"unsupported"`` (a ``require`` line of the
    schedule rejects these parameters, or for ``torch:NAME`` torch's constructor does) or
    ``"over-cap"`` (the schedule is larger than ``max_ops`` / ``max_steps`` allow: not
    checked).  ``failures`` holds one rendered message
    per broken property.  ``schedule``/``lowered`` are None when expansion failed; ``lowered``
    is the program ``ppir compile`` runs (compiled the same way, :func:`ppir.compile`).
    """

    name: str
    params: dict[str, int]
    status: str = "ok"
    failures: list[str] = field(default_factory=list)
    schedule: Schedule | None = None
    lowered: Schedule | None = None
    compiled: object = None  # the ppir.pipeline.Compiled the checks read
    peak_activations: Fraction | None = None
    bubble: float | None = None
    step_time: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def fail(self, message: str) -> None:
        self.status = "failed"
        self.failures.append(message)

    def render(self) -> str:
        """A heading naming the schedule and parameters, then every failure."""
        ps = ", ".join(f"{k}={v}" for k, v in self.params.items())
        head = {
            "ok": "holds",
            "failed": "FAILS",
            "unsupported": "is not defined (torch's constructor rejects it)"
            if self.name.startswith("torch:")
            else "is not defined (a require line rejects it)",
            "over-cap": "is over the size cap (not checked)",
        }[self.status]
        return "\n".join([f"{self.name}({ps}) {head}"] + self.failures)


def load_module(spec: str | os.PathLike) -> Module:
    """Parse a .pps file or built-in name once (cached by its text).  A CSV or JSON program
    declares no parameters (:func:`ppir.frontend.loader.declared_params`): an empty module, no
    header and no items.  PpirError when unusable."""
    from ppir.diagnostics import error
    from ppir.frontend.loader import parse_cached, read_source, schedule_kind, schedule_spec

    spec = schedule_spec(spec)
    kind = schedule_kind(spec)
    if kind in ("csv", "json"):
        return Module(spec, None, ())
    if kind == "torch":  # no .pps text whose parameters and require lines could be read
        raise error(
            "bad-usage",
            f"{spec}: torch's schedule classes cannot be checked over parameter ranges here",
            hints=[
                f"ppir check {spec} -D P=.. -D M=.. checks one size at a time; in Python, "
                f"draw the sizes with hypothesis and call check_schedule({spec!r}, P=.., M=..), "
                "whose status is 'unsupported' where torch rejects the size"
            ],
        )
    return parse_cached(*read_source(spec))


def expand_params(
    spec,
    params: dict[str, int],
    *,
    max_ops: int = DEFAULT_MAX_OPS,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> Schedule:
    """Expand a .pps schedule (path, built-in name, or parsed Module) for ``params``."""
    module = spec if isinstance(spec, Module) else load_module(spec)
    return expand(module, params, max_ops=max_ops, max_steps=max_steps, define_flag="")


def eval_bound(
    bound: Bound, env: dict[str, int], option: str = "a bound"
) -> Fraction | float | None:
    """The numeric value of a bound under the parameters ``env`` (None for no bound); a
    ValueError naming ``option`` for NaN, which no value exceeds (the check could never fail)."""
    if bound is None:
        return None
    given = bound
    if callable(bound):
        bound = bound(dict(env))
    if isinstance(bound, str):
        bound = Expr.parse(bound).eval(env)
    if isinstance(bound, bool) or not isinstance(bound, (int, float, Fraction)):
        raise TypeError(f"a bound must be a number, an expression or a callable, got {bound!r}")
    if bound != bound:  # NaN
        by = f" (returned by {given!r:.60})" if callable(given) else ""
        raise ValueError(f"{option} is NaN{by}: no value exceeds it, so the check cannot fail")
    if isinstance(bound, (int, Fraction)) and abs(bound) > sys.float_info.max:  # 1e308*10
        return math.inf if bound > 0 else -math.inf  # as it compares with a float: past all
    return bound


def check_schedule(
    schedule: Schedule | str | os.PathLike,
    *,
    max_peak_activations: Bound = None,
    max_bubble: Bound = None,
    max_step_time: Bound = None,
    lowering: str = "auto",
    progress: str = "fifo",
    strict: bool = False,
    max_ops: int = DEFAULT_MAX_OPS,
    **params: int,
) -> CheckResult:
    """Check one schedule for one parameter choice; see the module docstring.

    ``schedule`` is an expanded :class:`Schedule` (then ``params`` must be empty), a .pps,
    .csv or .json path, a built-in name, or ``torch:NAME`` (one size, as ``ppir check``).
    ``strict`` turns the verifier's lint warnings into failures.
    """
    if isinstance(schedule, Schedule):
        if params:
            raise TypeError("parameters apply to a .pps file, not to an expanded Schedule")
        s = schedule
    elif not isinstance(schedule, (str, os.PathLike)):  # was os.fspath's TypeError
        raise TypeError(misfit(schedule, "a schedule is a Schedule, a path or a name"))
    else:
        spec = os.fspath(schedule)
        from ppir.frontend.loader import load_schedule, schedule_kind

        _misspelt_check(spec, params)
        try:
            if schedule_kind(spec) in ("csv", "json", "torch"):  # no .pps text: read as given
                s = load_schedule(spec, params, max_ops=max_ops, define_flag="")
            else:
                s = expand_params(spec, params, max_ops=max_ops)
        except PpirError as e:
            if e.kind in USAGE_KINDS or e.kind == "syntax-error":
                raise
            res = CheckResult(_display(spec), dict(params))
            if e.kind in _UNDEFINED or e.kind == "too-large":  # not a fault of the schedule
                res.status = "unsupported" if e.kind in _UNDEFINED else "over-cap"
                res.failures.append(e.render())
            else:
                res.fail(f"expansion fails:\n{e.render()}")
            return res
    res = CheckResult(s.name, dict(s.params), schedule=s)
    where = s.name if isinstance(schedule, Schedule) else os.fspath(schedule)
    for option, bound in (
        ("max_peak_activations", max_peak_activations),
        ("max_bubble", max_bubble),
        ("max_step_time", max_step_time),
    ):
        check_bound_names(option, bound, s.param_dict, where)
    _check_expanded(res, s, lowering, progress, strict)
    if res.ok:
        _check_bounds(res, max_peak_activations, max_bubble, max_step_time)
    return res


def check_options() -> list[str]:
    """The checks :func:`check_schedule` takes by keyword (the rest are schedule parameters)."""
    import inspect

    sig = inspect.signature(check_schedule).parameters.items()
    return [n for n, p in sig if p.kind is p.KEYWORD_ONLY]


def closest_check(word: str, candidates: list[str]) -> list[str]:
    """``did you mean ...`` for a misspelt keyword: a candidate it begins (``max_peak`` ->
    ``max_peak_activations``), else the closest by spelling."""
    from ppir.diagnostics import did_you_mean

    starts = [c for c in candidates if c.startswith(word)] if len(word) >= 3 else []
    return [f"did you mean '{starts[0]}'?"] if len(starts) == 1 else did_you_mean(word, candidates)


def _misspelt_check(spec: str, params: dict) -> None:
    """A keyword that is no parameter of the schedule but close to a check's name
    (``max_peak=``) is a TypeError naming the check, not an 'unknown parameter'."""
    from ppir.frontend.loader import declared_params

    declared = declared_params(spec)
    for k in params:
        hint = [] if k in declared else closest_check(k, check_options())
        if hint:
            raise TypeError(
                f"check_schedule() got an unexpected keyword argument {k!r} ({hint[0]})"
            )


def _display(spec: str) -> str:
    """How a result names a schedule that did not expand: as an expanded one is named, by its
    header (``schedule warm1f1b(P, M, K)`` in warm.pps: ``warm1f1b``), else by the file's stem
    (it said ``warm`` when expansion failed and ``warm1f1b`` when the verifier did)."""
    from ppir.frontend.loader import parse_cached, read_source, schedule_kind

    if schedule_kind(spec) == "pps":
        module = parse_cached(*read_source(spec))
        if module.header is not None:
            return module.header.name
    return os.path.splitext(os.path.basename(spec))[0] or spec


def _check_expanded(
    res: CheckResult, s: Schedule, lowering: str, progress: str, strict: bool
) -> None:
    from ppir.diagnostics import group_repeats
    from ppir.pipeline import compile

    res.compiled = c = compile(s, lowering=lowering, progress=progress, strict=strict)
    res.lowered = c.program
    if not c.ok:
        errors = group_repeats(c.report.errors)  # repeats of one line merged, as 'ppir check'
        res.fail("the verifier rejects it:\n" + "\n".join(d.render() for d in errors))


#: Names a bound expression may read besides the schedule's parameters.
BOUND_NAMES = ("ranks", "stages", "microbatches")


def check_bound_names(option: str, bound: Bound, params, schedule: str) -> None:
    """A bound expression that reads a name other than the schedule's ``params``,
    :data:`BOUND_NAMES`, ``min`` and ``max`` is a ``bad-range`` error naming the ``option``
    (``--max-peak`` in ``ppir fuzz``, ``max_peak_activations`` here), the bound and the name, so
    the mistake shows before any check; numbers, callables and None pass."""
    if not isinstance(bound, str):
        return
    declared = list(params)
    names = Expr.parse(bound, shown=f"{option} '{bound}'").names  # its errors name the option
    unknown = sorted(names - {*declared, *BOUND_NAMES, "min", "max"})
    if unknown:
        raise error(
            "bad-range",
            f"{option} '{bound}' refers to '{unknown[0]}', which is not a parameter of {schedule}",
            hints=did_you_mean(unknown[0], declared)
            + [f"its parameters: {', '.join(declared) or 'none'}; also {', '.join(BOUND_NAMES)}"],
        )


def _check_bounds(res: CheckResult, max_peak: Bound, max_bubble: Bound, max_step: Bound) -> None:
    s = res.lowered
    env = {**s.param_dict, **dict(zip(BOUND_NAMES, (s.ranks, s.stages, s.microbatches)))}
    if max_peak is not None:
        from ppir.analysis.memory import analyze_memory

        mem = analyze_memory(res.compiled.graph)
        worst = mem.worst
        res.peak_activations = worst.peak_activations
        limit = eval_bound(max_peak, env, "max_peak_activations")
        if worst.peak_activations > limit + _TOLERANCE:
            res.fail(
                f"peak activations {_fmt(worst.peak_activations)} A on rank {worst.rank} "
                f"(at {worst.peak_op}) exceed the bound {_fmt(limit)} A ({max_peak!r})"
            )
    if max_bubble is not None or max_step is not None:
        e = res.compiled.estimate
        res.bubble, res.step_time = e.bubble_fraction_of_ideal, e.step_time
        for what, value, bound, option in (
            ("bubble/ideal", e.bubble_fraction_of_ideal, max_bubble, "max_bubble"),
            ("step time", e.step_time, max_step, "max_step_time"),
        ):
            limit = eval_bound(bound, env, option)
            if limit is not None and value > float(limit) + _TOLERANCE:
                res.fail(
                    f"{what} {value:.6g} exceeds the bound {_fmt(limit)} ({bound!r}) "
                    f"under the estimator's textbook costs"
                )


def _fmt(x) -> str:
    if isinstance(x, Fraction):
        return str(x.numerator) if x.denominator == 1 else f"{x} (= {float(x):.4g})"
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def assert_schedule_ok(
    schedule: Schedule | str | os.PathLike,
    *,
    max_peak_activations: Bound = None,
    max_bubble: Bound = None,
    max_step_time: Bound = None,
    **kwargs,
) -> CheckResult:
    """Like :func:`check_schedule`, but raise ``AssertionError`` (message: the rendered
    diagnostics) unless every property holds.  Returns the result for further assertions."""
    __tracebackhide__ = True  # pytest shows the user's test and the message, not this frame
    res = check_schedule(
        schedule,
        max_peak_activations=max_peak_activations,
        max_bubble=max_bubble,
        max_step_time=max_step_time,
        **kwargs,
    )
    if not res.ok:
        raise AssertionError(res.render())
    return res


def misfit(got, takes: str) -> str:
    """``takes`` and what was got instead; of a Compiled, which of its schedules to pass."""
    if isinstance(getattr(got, "program", None), Schedule):
        return f"{takes}, got what ppir.compile returns: pass its .program (lowered) or .source"
    return f"{takes}, got {type(got).__name__} {got!r:.60}"


def schedule_path(schedule, fn: str) -> str:
    """``schedule`` (a path or a built-in name) as a str, for ``fn``, which draws parameters
    for it; a TypeError naming the value otherwise (an expanded Schedule: what takes it)."""
    if isinstance(schedule, (str, os.PathLike)):
        return os.fspath(schedule)
    said = misfit(schedule, f"{fn} takes a .pps path or a built-in name")[:160]
    if isinstance(schedule, Schedule):
        said += "; an expanded Schedule has its parameters fixed: assert_schedule_ok(schedule)"
    raise TypeError(said)


def property_keywords(path: str, checks: dict) -> None:
    """A misspelt check (``max_peak=``) is a TypeError when the test is defined, not an
    'unknown parameter' when it runs: each keyword must be an option of
    :func:`check_schedule` (which :func:`assert_schedule_ok` takes) or a parameter of the
    schedule (held fixed)."""
    from ppir.frontend.loader import declared_params

    options = check_options()
    params = sorted(declared_params(path))
    known = options + params
    for k in checks:
        if k not in known:
            hint = closest_check(k, known)
            raise TypeError(
                f"property_test() got an unexpected keyword argument {k!r}"
                + (f" ({hint[0]})" if hint else "")
                + f": the checks are {', '.join(options)}; the parameters of {path} are "
                + (", ".join(params) or "none")
            )
