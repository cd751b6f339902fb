"""Parameter spaces: ``P=2..16``, ``M=P..8P``, ``v=1,2,4``, evaluated in declaration order.

A :class:`ParamSpace` is an ordered list of (name, :class:`Domain`).  A domain's bounds are small
integer expressions over the parameters declared before it (and the fixed values the caller
gives), so ``M=P..8P`` follows whatever ``P`` was drawn.  Ranges are inclusive at both ends.

Expression syntax: integers, names, ``+ - * // %``, ``/`` (exact division, giving a Fraction),
parentheses, ``min(...)``, ``max(...)`` and implicit multiplication by a literal (``8P``,
``2(P-1)``).  Nothing is passed to ``eval``: the text is parsed with :mod:`ast` and only those
nodes are accepted.  Every malformed spec is a ppir diagnostic (``bad-range``, exit 2).

No hypothesis here: the CLI (``ppir fuzz``) and the strategies share this module.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction

from ppir.diagnostics import PpirError, did_you_mean, error
from ppir.frontend.limits import read_int
from ppir.testing.value_lists import refuse_repeats, split_option, split_values, value_items

Number = int | Fraction
# A number literal (read whole, as the lookahead holds it: '1e3' is one, not 1 times e3; not
# the digits ending a name, v2) right before a name or '(' is multiplied by it: 8P, 2(P-1).
_NUMBER = r"(?:\d(?:_?\d)*\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_IMPLICIT_MUL = re.compile(rf"(?<![\w.])(?=({_NUMBER}))\1\s*(?=[A-Za-z_(])", re.ASCII)
# An integer literal in any script's digits (not a float's, 0.5 1e3; not a name's, v2): read
# as a -D value is (read_int), so 04 is 4 as -D M=04 reads it, and '٤' is refused alike.
_INT_LITERAL = re.compile(r"(?<![\w.])\d(?:_?\d)*(?![.\d_]|[eE][+-]?\d)")
_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Div: lambda a, b: Fraction(a) / b,
}


@dataclass(frozen=True)
class Expr:
    """A parsed bound expression; ``names`` are the parameters it reads."""

    text: str
    tree: ast.expr
    names: frozenset[str]

    @staticmethod
    def parse(text: str | int, integers: bool = False, shown: str = "") -> Expr:
        """Parse ``text`` (an int is taken literally); PpirError ``bad-range`` when malformed,
        naming it ``shown`` when given (the option it is the whole of: ``--over M=a+``).
        ``integers``: it is a domain's, whose literals are integers (for the hints only)."""
        try:  # as read: 04 is 4 in every message
            src = _read_ints(str(text).strip())
        except PpirError as e:
            raise _led_by(e, shown) from None
        try:
            tree = ast.parse(_python(src), mode="eval").body
        except SyntaxError:
            what = (
                f"{shown}: cannot read the expression"
                if shown
                else f"cannot read the expression '{src}'"
            )
            raise error("bad-range", what, hints=[_syntax(integers)]) from None
        names = frozenset(_check(tree, shown or f"'{src}'", integers))
        return Expr(src, tree, names)

    def eval(self, env: Mapping[str, Number]) -> Number:
        """The value under ``env``: an int, or a Fraction when '/' does not divide exactly."""
        missing = sorted(self.names - set(env) - {"min", "max"})
        if missing:
            raise error(
                "bad-range",
                f"'{self.text}' refers to '{missing[0]}', which has no value here",
                hints=did_you_mean(missing[0], env)
                + ["a bound may use parameters declared before it"],
            )
        try:
            v = _eval(self.tree, env)
        except ZeroDivisionError:
            at = ", ".join(f"{k}={env[k]}" for k in sorted(self.names & set(env)))
            raise error(
                "bad-range", f"division by zero in '{self.text}'" + (f" at {at}" if at else "")
            ) from None
        if isinstance(v, Fraction) and v.denominator == 1:
            return int(v)
        return v


def _syntax(integers: bool) -> str:
    """The hint on what an expression may hold (a domain's literals are integers)."""
    numbers, example = ("integers", "P//2") if integers else ("numbers", "0.5")
    return f"use {numbers}, names, + - * // % /, min(), max(); e.g. 8P, 2*P-1 or {example}"


def _python(src: str) -> str:
    """``src`` as Python reads it: integer literals as :func:`_read_ints` reads them and
    implicit multiplications written out (``8P`` -> ``8*P``)."""
    return _IMPLICIT_MUL.sub(r"\1*", _read_ints(src))


def _read_ints(src: str) -> str:
    """``src`` with its integer literals as :func:`read_int` reads them, as ``-D`` values
    are (``04`` -> ``4``, ``1_000`` -> ``1000``); a ``bad-range`` error for one in other
    digits ('٤').  What an expression is shown as, so that ``--over M=04`` reads ``M in 4``
    as ``-D M=04`` reads ``M=4``."""

    def integer(m: re.Match) -> str:
        try:
            return str(read_int(m[0]))
        except ValueError as e:
            where = "" if m[0] == src else f" in '{src}'"
            raise error("bad-range", f"a number{where} {e}") from None

    return _INT_LITERAL.sub(integer, src)


def _integer_expr(spec, option: str = "", whole: bool = False) -> Expr:
    """A domain's bound or value: an :class:`Expr` whose number literals are integers (a
    parameter's values are); ``bad-range`` naming the first that is not: ``1e3``, ``2.0``,
    ``0.5`` (where ``1e3`` was read as 1 times a name ``e3``, and ``2.0`` taken as 2).
    ``option`` (``--over M=...``) leads its errors, or names it when it is the ``whole``
    value, so that no message repeats it: ``--over M=1.5 is not an integer``."""
    shown = option if whole else ""
    try:
        e = Expr.parse(spec, integers=True, shown=shown)
    except PpirError as err:
        raise _led_by(err, "" if shown else option) from None
    for node in ast.walk(e.tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, float):
            lit = ast.get_source_segment(_python(e.text), node) or repr(node.value)
            where = "" if lit == e.text else f" in '{e.text}'"
            v = node.value
            it = shown if shown and lit == e.text else f"'{lit}'{where}"
            raise _led_by(
                error(
                    "bad-range",
                    f"{it} is not an integer: a parameter's values are integers",
                    hints=[
                        f"write it as {int(v)}"
                        if v.is_integer()
                        else "divide with // for an integer, e.g. P//2"
                    ],
                ),
                "" if it == shown else option,
            )
    return e


def _led_by(e: PpirError, option: str) -> PpirError:
    """``e`` with its message led by ``option`` as given (``--over M=P..2*: ...``)."""
    if not option:
        return e
    d = e.diagnostics[0]
    return PpirError(
        [replace(d, message=f"{option}: {d.message}"), *e.diagnostics[1:]], e.exit_code
    )


def _check(node: ast.AST, src: str, integers: bool) -> set[str]:
    """The names an expression reads; bad-range for anything outside the small language
    (``src``: the expression as errors name it, ``'foo(1)'`` or ``--over M=foo(1)``)."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):  # 0.5: exactly 1/2
        if node.value == math.inf:  # 1e400: past a float's range, Python reads it as infinity
            raise error(
                "bad-range", f"{src} holds a number past 1.8e308, the largest a float holds"
            )
        return set()
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _check(node.left, src, integers) | _check(node.right, src, integers)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _check(node.operand, src, integers)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("min", "max")
        and node.args
        and not node.keywords
    ):
        return set().union(*(_check(a, src, integers) for a in node.args))
    raise error("bad-range", f"{src} is not a bound expression", hints=[_syntax(integers)])


def _eval(node: ast.expr, env: Mapping[str, Number]) -> Number:
    if isinstance(node, ast.Constant):
        v = node.value
        return Fraction(repr(v)) if isinstance(v, float) else v
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.BinOp):
        return _BINOPS[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        return -v if isinstance(node.op, ast.USub) else v
    fn = min if node.func.id == "min" else max
    return fn(_eval(a, env) for a in node.args)


@dataclass(frozen=True)
class Domain:
    """The values of one parameter: ``lo..hi`` (inclusive) or an explicit list of choices."""

    lo: Expr | None = None
    hi: Expr | None = None
    choices: tuple[Expr, ...] = ()
    option: str = field(default="", compare=False)  # how errors name it: --over M=P..8P

    @property
    def names(self) -> frozenset[str]:
        exprs = [e for e in (self.lo, self.hi) if e is not None] + list(self.choices)
        return frozenset().union(*(e.names for e in exprs))

    def bounds(self, env: Mapping[str, Number]) -> tuple[int, int] | None:
        """(lo, hi) of an interval under ``env`` (hi < lo means empty); None for choices."""
        if self.lo is None:
            return None
        return _as_int(self.lo.eval(env), self.lo.text), _as_int(self.hi.eval(env), self.hi.text)

    def values(self, env: Mapping[str, Number]) -> list[int]:
        """All values under ``env``, ascending (materialises an interval: use on small ones)."""
        b = self.bounds(env)
        if b is not None:
            return list(range(b[0], b[1] + 1))
        return sorted({_as_int(e.eval(env), e.text) for e in self.choices})

    def __str__(self) -> str:
        if self.lo is not None:
            return f"{self.lo.text}..{self.hi.text}"
        return ",".join(e.text for e in self.choices)


def _as_int(v: Number, text: str) -> int:
    if isinstance(v, Fraction):
        raise error(
            "bad-range", f"'{text}' is {v}, not an integer", hints=["use // for integer division"]
        )
    return v


def parse_domain(spec, option: str = "") -> Domain:
    """A domain from ``"2..16"``, ``"P..8P"``, ``"1,2,4"``, ``"P"``, an int, a ``range`` or a
    list of ints/expressions.  PpirError ``bad-range`` when malformed, naming the text as
    ``'1,,2'``, or as ``option`` when it came in one (``--over M=1,,2 has an empty value``:
    the option and its value once, not ``--over M=1,,2: '1,,2' has ...``)."""
    if isinstance(spec, bool):
        raise error("bad-range", f"{spec!r} is not a parameter domain")
    if isinstance(spec, int):
        return Domain(choices=(_integer_expr(spec),))
    if isinstance(spec, range):
        if not spec:  # was read as the bounds start..stop-1 and blamed on the require lines
            raise error("bad-range", f"{spec!r} is empty: it holds no value")
        if spec.step == 1:
            return Domain(_integer_expr(spec.start), _integer_expr(spec.stop - 1))
        return Domain(choices=tuple(_integer_expr(v) for v in spec))
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise error("bad-range", "an empty list of values")
        return _choices(spec, f"{spec!r}")
    if not isinstance(spec, str):
        raise error(
            "bad-range",
            f"{spec!r} is not a parameter domain",
            hints=["give an int, a range, a list, or text like '2..16' or 'P..8P'"],
        )
    if not spec.strip():  # was: "cannot read the expression ''"
        raise error(
            "bad-range",
            "an empty domain: it holds no value",
            hints=["e.g. 2..16 (inclusive at both ends), P..8P or a list of values, 1,2,4"],
        )
    it = option or f"'{spec}'"
    if ".." in spec:
        items = split_values(spec)
        if len(items) > 1:  # '4..8,16': was "'8,16' is not a bound expression"
            what = ": a range and a list of values cannot be mixed"
            if not all(map(str.strip, items)):  # '4..8,' has an empty value, as '4,8,' does
                what = " has an empty value"
            raise error(
                "bad-range",
                f"{it}{what}",
                hints=[
                    "a range is LO..HI alone (every value from LO to HI, e.g. 2..16); a list "
                    "gives each value, e.g. 1,2,4"
                ],
            )
        lo, _, hi = spec.partition("..")
        if not lo.strip() or not hi.strip():
            raise error("bad-range", f"{it}: a range needs both ends, e.g. 2..16")
        if hi.lstrip().startswith(".") or ".." in hi:  # '2...4' read '.4' as 2/5; '2..4..6'
            raise error(
                "bad-range",
                f"{it}: a range is LO..HI, with two dots between its two ends",
                hints=["e.g. 2..16 (inclusive at both ends); a list of values is 1,2,4"],
            )
        d = Domain(_integer_expr(lo, option), _integer_expr(hi, option))
        low, high = d.bounds({}) if not d.names else (0, 0)
        if low > high:  # two constants, the wrong way round
            raise error(
                "bad-range",
                f"{it} is empty: ranges run from the low end up, inclusive at both ends",
                hints=[f"did you mean {d.hi.text}..{d.lo.text}?"],
            )
        return d
    return _choices(value_items(spec, it), it, option)


def constant_bounds(spec: str, option: str) -> tuple[int, int]:
    """(lo, hi) of a range ``LO..HI`` whose ends are constants, read as :func:`parse_domain`
    reads fuzz's (inclusive at both ends, its errors); ``bad-range`` naming ``option`` (the
    option as given) when a bound reads a parameter (``P..8P``): 'ppir sweep' lists each value
    of its range, so it has no parameter to evaluate the bounds with."""
    d = parse_domain(spec, option)
    if d.names:
        late = sorted(d.names)[0]
        raise error(
            "bad-range",
            f"{option}: a range's ends must be integers here, not expressions of '{late}'",
            hints=[
                "e.g. --over M=4..12 (every value, inclusive at both ends); 'ppir fuzz' "
                "takes ranges over other parameters (--over P=2..8 --over M=P..8P)"
            ],
        )
    return d.bounds({})


def _choices(items, shown: str, option: str = "") -> Domain:
    """A list of values, each an :func:`_integer_expr`; one given twice is refused
    (:func:`refuse_repeats`), two that depend on parameters and meet are one choice."""
    exprs = tuple(_integer_expr(v, option, len(items) == 1) for v in items)
    refuse_repeats([e.eval({}) if not e.names else e.text.replace(" ", "") for e in exprs], shown)
    return Domain(choices=exprs)


def parse_over(text: str) -> tuple[str, Domain]:
    """``"M=P..8P"`` -> ("M", Domain).  PpirError ``bad-range`` when malformed, naming the
    option as given once (``--over M=٤: ...``, ``--over M=4,4 lists 4 twice``)."""
    name, spec = split_option(text, "NAME=LO..HI or NAME=V1,V2,...")
    return name, replace(parse_domain(spec, f"--over {text}"), option=f"--over {text}")


class ParamSpace:
    """Ordered parameter domains plus fixed values.  A *point* is a dict of every drawn name.

    Contract: a domain may read the fixed values and the names declared before it; the
    constructor checks this (bad-range otherwise), so evaluation never meets an unknown name.
    """

    def __init__(self, domains: Iterable[tuple[str, Domain]], fixed: Mapping[str, int] = ()):
        self.domains = list(domains)
        self.fixed = dict(fixed)
        known = set(self.fixed)
        for name, dom in self.domains:
            if name in known:
                raise error("bad-range", f"parameter '{name}' is given twice")
            late = sorted(dom.names - known - {"min", "max"})
            if late:
                it = dom.option or f"the domain of '{name}' ({dom})"
                raise error(
                    "bad-range",
                    f"{it} names no parameter given before it"
                    if str(dom) == late[0]
                    else f"{it} refers to '{late[0]}'",
                    hints=[
                        (
                            f"give --over {late[0]}=... before {dom.option}"
                            if dom.option  # the command line's order, not the schedule's
                            else f"declare '{late[0]}' before '{name}'"
                        )
                        if late[0] in {n for n, _ in self.domains}
                        else f"'{late[0]}' is not a parameter declared before it",
                        *did_you_mean(late[0], sorted(known)),
                    ],
                )
            known.add(name)

    @classmethod
    def from_specs(cls, specs: Mapping[str, object], fixed: Mapping[str, int] = ()) -> ParamSpace:
        return cls(((k, parse_domain(v)) for k, v in specs.items()), fixed)

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.domains]

    def describe(self) -> str:
        return ", ".join(f"{n} in {d}" for n, d in self.domains)

    def env(self, point: Mapping[str, int]) -> dict[str, int]:
        """Fixed values overlaid with ``point``: the parameters to expand a schedule with."""
        return {**self.fixed, **point}
