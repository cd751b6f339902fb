"""ppir fuzz: check a schedule over a whole parameter space and shrink the first failure."""

from __future__ import annotations

from ppir.cli.argtypes import integer, positive_int
from ppir.cli.common import add_defines, parse_defines
from ppir.cli.output import add_quiet_argument, progress
from ppir.diagnostics import EXIT_INVALID, EXIT_OK, EXIT_USAGE, count, error
from ppir.frontend.expand import check_given
from ppir.frontend.loader import check_params, schedule_kind
from ppir.pipeline import LOWERINGS
from ppir.testing.checks import check_bound_names, check_schedule, load_module
from ppir.testing.search import search
from ppir.testing.space import ParamSpace, parse_over

NAME = "fuzz"
HELP = "check a schedule for many parameter choices; shrink a failing one"
DESCRIPTION = """Expand, lower and verify a schedule for many parameter choices drawn from the
given ranges (and check optional bounds on peak activations, bubble and step time), the same
properties as ppir.testing.assert_schedule_ok.  The low corner and the high corner of the space
come first, then seeded random points.  Points a 'require' line of the schedule rejects are
skipped, and so are points over the size cap (--max-ops).  On the first failure the parameters
are shrunk (each lowered in turn while it still fails, then bisected: a local minimum) and the
shrunk choice is printed with its diagnostic.

Ranges are inclusive, and a bound may use the parameters given before it: --over P=2..16
--over M=P..8P.  A list of values is written v=1,2,4.  Bounds (--max-peak, --max-bubble,
--max-step-time) are expressions over the parameters, e.g. --max-peak P or --max-bubble '(P-1)/M'.
A progress bar goes to stderr on a terminal (none when piped, or with --quiet).

examples:
  ppir fuzz 1f1b --over P=2..16 --over M=P..8P --max-peak P
  ppir fuzz interleaved_1f1b --over P=2..8 --over v=1,2,4 --over M=P..4P --examples 200
  ppir fuzz my.pps --over P=2..16 --over M=P..8P --max-bubble '(P-1)/M' --seed 3

exit status: 0 every checked choice holds, 1 a failing choice was found, 2 unusable input.
"""


def add_arguments(p):
    p.add_argument("schedule", metavar="SCHEDULE", help="a .pps file or a built-in name")
    p.add_argument(
        "--over",
        action="append",
        default=[],
        metavar="NAME=LO..HI",
        help="a parameter and its values: P=2..16 (inclusive), M=P..8P, v=1,2,4 "
        "(repeatable; order matters: bounds may use earlier parameters)",
    )
    add_defines(p, "fix a parameter (repeatable)")
    p.add_argument(
        "--max-peak",
        metavar="EXPR",
        help="bound on the worst rank's peak activations, in A (e.g. P)",
    )
    p.add_argument(
        "--max-bubble",
        metavar="EXPR",
        help="bound on bubble/ideal (a fraction: idle / busy) under the estimator's textbook costs",
    )
    p.add_argument(
        "--max-step-time",
        metavar="EXPR",
        help="bound on the estimated step time in forwards of a rank share (F=1, B=2)",
    )
    p.add_argument(
        "--examples",
        type=positive_int,
        default=100,
        metavar="N",
        help="parameter choices to check (default 100)",
    )
    p.add_argument("--seed", type=integer, default=0, metavar="N", help="random seed (default 0)")
    p.add_argument(
        "--lowering",
        choices=list(LOWERINGS),
        default="auto",
        help="how communication is inserted, as for 'ppir compile' (default auto)",
    )
    p.add_argument("--strict", action="store_true", help="treat verifier warnings as errors")
    p.add_argument(
        "--max-ops",
        type=positive_int,
        default=2_000_000,
        metavar="N",
        help="cap on expanded ops per choice (default 2,000,000)",
    )
    add_quiet_argument(p)


def _space(args) -> ParamSpace:
    if not args.over:
        raise error(
            "bad-usage",
            "nothing to fuzz: give at least one --over NAME=LO..HI",
            hints=["e.g. ppir fuzz 1f1b --over P=2..16 --over M=P..8P"],
        )
    module = load_module(args.schedule)  # syntax errors: exit 2 before any search
    declared = {p.name: p.default for p in module.header.params} if module.header else {}
    over = [parse_over(o) for o in args.over]
    fixed = parse_defines(args.defines)
    fixed_program = schedule_kind(args.schedule) in ("csv", "json")
    hints = [f"'ppir check {args.schedule}' checks it"] if fixed_program else []
    given = {name: text.partition("=")[2] for text, (name, _) in zip(args.over, over)}
    check_params(args.schedule, given, "--over", hints)  # as every loader words it
    check_params(args.schedule, fixed, "-D", hints)
    seen: dict[str, str] = {}
    for text, (name, _) in zip(args.over, over):
        if name in fixed:
            raise error(
                "bad-range",
                f"--over {text}: '{name}' is also given with -D {name}={fixed[name]}",
                hints=[f"give {name} once: --over to draw it, or -D to fix it"],
            )
        if name in seen:
            raise error(
                "bad-range",
                f"--over {text}: '{name}' is given twice (--over {seen[name]}, then --over {text})",
                hints=[f"one --over per parameter: a list of values is {name}=2,4,8"],
            )
        seen[name] = text
    names = {n for n, _ in over}
    # now, in this command's words: the first check said "give it with M=..." (the API's)
    check_given(module, names | set(fixed), lambda n: f"--over {n}=... or -D {n}=...")
    defaults = {
        k: v for k, v in declared.items() if k not in names and k not in fixed and v is not None
    }
    for flag, b in (
        ("--max-peak", args.max_peak),
        ("--max-bubble", args.max_bubble),
        ("--max-step-time", args.max_step_time),
    ):
        check_bound_names(flag, b, declared, args.schedule)  # now, not at the first check
    return ParamSpace(over, {**defaults, **fixed})


class _Shown:
    """The search's progress callback: one step per checked choice, with its parameters and
    outcome; at the first failure the bar becomes the count of shrinking tries."""

    def __init__(self, bar, names):
        self.bar, self.names, self.shrinking = bar, names, False

    def checking(self, params: dict) -> None:
        """The choice now checked, before its outcome (one can take many seconds)."""
        ps = " ".join(f"{k}={params[k]}" for k in self.names)
        self.bar.update(0, f"{ps}: checking")

    def __call__(self, point: dict, result) -> None:
        ps = " ".join(f"{k}={v}" for k, v in point.items())
        if result.status == "failed" and not self.shrinking:
            self.shrinking = True
            self.bar.restart(f"shrinking the failure at {ps}")
            return
        skipped = result.status in ("unsupported", "over-cap")
        self.bar.update(0 if skipped else 1, f"{ps}: {result.status}")


def _held(args, rest: list) -> str:
    """The values of the failing run that were not drawn: those held (-D, integer defaults)
    and those a default expression computed from the drawn ones (it said 'N=4 fixed' for
    interleaved_1f1b's N = P, which followed P through the search), to rerun it as it ran."""
    header = load_module(args.schedule).header
    given = parse_defines(args.defines)
    exprs = {
        p.name: p.default_text
        for p in (header.params if header else ())
        if p.default_expr is not None and p.name not in given
    }
    fixed = ", ".join(f"{k}={v}" for k, v in rest if k not in exprs)
    derived = ", ".join(f"{k}={v} by its default {exprs[k]}" for k, v in rest if k in exprs)
    return "".join(f"{part}; " for part in (fixed and f"{fixed} fixed", derived) if part)


def run(args) -> int:
    space = _space(args)
    shown = None

    def check(params: dict):
        shown.checking(params)
        return check_schedule(
            args.schedule,
            max_peak_activations=args.max_peak,
            max_bubble=args.max_bubble,
            max_step_time=args.max_step_time,
            lowering=args.lowering,
            strict=args.strict,
            max_ops=args.max_ops,
            **params,
        )

    with progress(args.examples, f"fuzz {args.schedule}", quiet=args.quiet, unit="choices") as bar:
        shown = _Shown(bar, [n for n, _ in space.domains])
        res = search(space, check, examples=args.examples, seed=args.seed, progress=shown)
    props = "verifies" + "".join(
        f", {what} <= {b}"
        for what, b in (
            ("peak", args.max_peak),
            ("bubble/ideal", args.max_bubble),
            ("step time", args.max_step_time),
        )
        if b is not None
    )
    if res.failure is not None:
        f = res.failure
        ps = ", ".join(f"{k}={v}" for k, v in f.params.items() if k in space.names)
        # the values it did not draw (-D and the schedule's defaults), to rerun it as it ran
        rest = f.schedule.params if f.schedule else f.params.items()
        held = _held(args, [(k, v) for k, v in rest if k not in space.names])
        print(
            f"FAILED: {args.schedule} with {ps} ({held}shrunk in "
            f"{count(res.shrink_steps, 'step')} from {_point(res.first_failure, space)}; "
            f"{count(res.checked, 'choice')} checked)"
        )
        print("\n".join(f.failures))
        return EXIT_INVALID
    if res.checked == 0:
        why = (
            "is under the size cap (--max-ops)"
            if res.over_cap and res.over_cap == res.skipped
            else "exists (the ranges are empty)"
            if not res.skipped
            else f"satisfies the require lines of {args.schedule}"
        )
        rejected = [(k, r) for k, r in res.cache.items() if r.status == "unsupported"]
        hints = []
        if rejected:  # which require line says no, for the first choice tried
            point, r = rejected[0]
            first = r.failures[0].splitlines()[0].replace(": error: ", ": ", 1)
            ps = ", ".join(f"{k}={v}" for k, v in point)
            hints = [f"with {ps}: {first}"]
        raise error(
            "no-valid-parameters",
            f"no choice in {space.describe()} {why}",
            hints=hints,
            exit_code=EXIT_USAGE,
        )
    print(
        f"ok: {args.schedule}: {count(res.checked, 'parameter choice')} "
        f"{'holds' if res.checked == 1 else 'hold'} ({props}) for "
        f"{space.describe()}{_checked_values(res, space)}"
        + (
            f"; {res.skipped - res.over_cap} rejected by require lines"
            if res.skipped > res.over_cap
            else ""
        )
        + (f"; {res.over_cap} over the size cap, not checked (--max-ops)" if res.over_cap else "")
    )
    return EXIT_OK


def _checked_values(res, space: ParamSpace) -> str:
    """`` (checked P 2..4)``: the values a parameter whose range names no other drawn one took
    among the choices checked, where they are not all of its range (a dependent range empty
    for some of them, ``M=P..4`` above P = 4, or a sample of a large space); "" otherwise."""
    done = [dict(k) for k, r in res.cache.items() if r.status == "ok"]
    parts = []
    for name, dom in space.domains:
        if dom.names - set(space.fixed) - {"min", "max"}:
            continue  # a range of earlier parameters: its values follow theirs
        vals = sorted({d[name] for d in done if name in d})
        if not vals or vals == dom.values(space.fixed):
            continue
        if len(vals) > 2 and vals == list(range(vals[0], vals[-1] + 1)):
            parts.append(f"{name} {vals[0]}..{vals[-1]}")
        elif len(vals) <= 6:
            parts.append(f"{name} {','.join(map(str, vals))}")
        else:
            parts.append(f"{name} {len(vals)} values in {vals[0]}..{vals[-1]}")
    return f" (checked {', '.join(parts)})" if parts else ""


def _point(r, space: ParamSpace) -> str:
    return ", ".join(f"{k}={v}" for k, v in r.params.items() if k in space.names)
