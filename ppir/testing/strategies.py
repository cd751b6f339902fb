"""Hypothesis strategies for pipeline schedules (imported lazily by :mod:`ppir.testing`).

* :func:`shapes` -- parameter dicts for a .pps schedule within bounds, filtered by the
  schedule's own ``require`` lines;
* :func:`valid_schedules` -- random valid schedules: random linear extensions of the dependency
  DAG cut into per-rank programs under a placement, optionally memory-capped;
* :func:`mutations` -- a schedule with ops swapped or moved inside one rank's program, for
  negative testing;

:func:`property_test`, a ready-made pytest test over :func:`shapes`, is in
:mod:`ppir.testing.property`.
"""

from __future__ import annotations

import os

try:
    from hypothesis import assume, note
    from hypothesis import strategies as st
except ImportError as e:  # pragma: no cover - exercised only without the test extra
    raise ImportError(
        "ppir.testing's strategies need hypothesis: pip install 'ppir[test]' "
        "(or pip install hypothesis)"
    ) from e

from ppir.diagnostics import PpirError
from ppir.frontend.expand import evaluate_top_level
from ppir.frontend.loader import check_params
from ppir.ir import Action, OpKind, Schedule, deps, looped_placement, vshape_placement
from ppir.testing.checks import load_module
from ppir.testing.space import Domain, ParamSpace, parse_domain

_RETRIES = 8  # draws per example before a require-rejected example is given up


def _domain_strategy(dom: Domain, env: dict) -> st.SearchStrategy[int] | None:
    bounds = dom.bounds(env)
    if bounds is None:
        return st.sampled_from(dom.values(env))
    lo, hi = bounds
    return st.integers(lo, hi) if lo <= hi else None


def _draw_point(draw, domains: list[tuple[str, object]], fixed: dict) -> dict[str, int] | None:
    """One point: hypothesis strategies are drawn as given, domains under the values so far.
    None when a domain is empty for the values drawn before it."""
    point: dict[str, int] = {}
    for name, dom in domains:
        if isinstance(dom, st.SearchStrategy):
            point[name] = draw(dom)
            continue
        strat = _domain_strategy(dom, {**fixed, **point})
        if strat is None:
            return None
        point[name] = draw(strat)
    return point


def _split_specs(specs: dict, fixed: dict) -> list[tuple[str, object]]:
    """Hypothesis strategies are kept; the rest become domains, checked to read only ``fixed``
    (header defaults) and the names before them, a strategy's included (a stand-in 0 here)."""
    drawn = {k: isinstance(v, st.SearchStrategy) for k, v in specs.items()}
    doms = ParamSpace.from_specs({k: 0 if drawn[k] else v for k, v in specs.items()}, fixed)
    return [(k, specs[k] if drawn[k] else dom) for k, dom in doms.domains]


def shapes(schedule: str | os.PathLike, **bounds) -> st.SearchStrategy[dict[str, int]]:
    """Parameter dicts for ``schedule`` (a .pps path or built-in name).

    Each keyword names a parameter of the schedule and gives its values: an int, a ``range``, a
    list, text like ``"2..16"`` (inclusive) or ``"P..8P"`` (bounds may use the parameters named
    before it and the header defaults of those not named), or a hypothesis strategy.  Parameters
    not named keep their defaults and are left out of the dict.  Draws that a ``require`` line
    of the schedule rejects are redrawn (then filtered out with ``assume``); any other expansion
    error is *not* filtered, so the property under test sees and reports it.
    """
    module = load_module(schedule)
    declared = {p.name: p.default for p in module.header.params} if module.header else {}
    check_params(schedule, bounds, "")  # in every loader's words
    defaults = {k: v for k, v in declared.items() if k not in bounds and v is not None}
    domains = _split_specs(bounds, defaults)
    if _any_supported(module, domains, defaults) is False:
        from ppir.diagnostics import EXIT_USAGE, error

        space = ", ".join(f"{k} in {d}" for k, d in domains)
        raise error(
            "no-valid-parameters",
            f"no choice in {space} satisfies the require lines of {os.fspath(schedule)}",
            exit_code=EXIT_USAGE,
        )

    @st.composite
    def draw_shape(draw):
        for _ in range(_RETRIES):
            point = _draw_point(draw, domains, defaults)
            if point is not None and _supported(module, point):
                return point
        assume(False)

    return draw_shape()


_ENUMERATE = 4096  # points shapes() tries before drawing, to tell an empty space apart


def _any_supported(module, domains, fixed: dict) -> bool | None:
    """Whether some point of ``domains`` (all plain, under ``fixed``) passes the schedule's
    ``require`` lines, trying them in order; None when a domain is a hypothesis strategy or
    the space has more than :data:`_ENUMERATE` points, or more than four times as many partial
    ones (unknown: the draws will tell)."""
    if any(isinstance(d, st.SearchStrategy) for _, d in domains):
        return None
    points, steps = [_ENUMERATE], [4 * _ENUMERATE]

    def walk(i: int, point: dict) -> bool | None:
        if i == len(domains):
            if points[0] == 0:
                return None  # more points than we try
            points[0] -= 1
            return _supported(module, point)
        name, dom = domains[i]
        env = {**fixed, **point}
        b = dom.bounds(env)  # an interval is walked lazily: it may be huge
        for value in range(b[0], b[1] + 1) if b is not None else dom.values(env):
            steps[0] -= 1
            if steps[0] < 0:
                return None
            found = walk(i + 1, {**point, name: value})
            if found is not False:
                return found
        return False

    try:
        return walk(0, {})
    except PpirError:  # a bound that cannot be evaluated here: the draws will report it
        return None


def _supported(module, point: dict[str, int]) -> bool:
    """False when a top-level ``require`` of the schedule rejects ``point`` (nothing expanded)."""
    try:
        evaluate_top_level(module, point)
    except PpirError as e:
        return e.kind != "require-failed"
    return True


def valid_schedules(
    P=range(1, 5),
    M=range(1, 7),
    v=range(1, 3),
    *,
    placement: str | tuple[int, ...] = "looped",
    split_backward: bool | None = False,
    max_in_flight: int | None = None,
) -> st.SearchStrategy[Schedule]:
    """Random valid compute-only schedules with ``S = P*v`` stages and ``M`` microbatches.

    The ops (F and B, or F, I and W with ``split_backward``; ``None`` picks per (stage,
    microbatch)) are put in a random linear extension of the data-dependency DAG and each rank
    runs the subsequence of its stages, so every result is complete and acyclic.  ``placement``
    is ``"looped"``, ``"vshape"``, ``"random"`` (each rank holds v stages, shuffled) or an
    explicit tuple of length P*v.  ``max_in_flight`` caps the chunk activations a rank holds (an
    F not yet freed by its B or W; see :func:`_linear_extension`); a ValueError when it is
    below every v, and draws whose v (chunks of a rank) it cannot hold are rejected.
    P, M and v take the same specs as :func:`shapes`; a ValueError when an integer, range or
    list spec holds no value of at least 1 (no schedule could be drawn).
    """
    if split_backward is not None and not isinstance(split_backward, bool):  # "yes" was True
        raise TypeError(
            f"valid_schedules: split_backward is True, False or None, got {split_backward!r:.40}"
        )
    for name, spec in (("P", P), ("M", M), ("v", v)):
        if isinstance(spec, int) and not isinstance(spec, bool):
            values = [spec]
        elif isinstance(spec, (range, list, tuple)):
            values = list(spec)
        else:
            continue  # a text domain ("2..P") is checked as it is drawn
        if not any(isinstance(x, int) and x >= 1 for x in values):
            raise ValueError(f"valid_schedules: {name} needs a value of at least 1, got {spec!r}")
        usable = [x for x in values if isinstance(x, int) and x >= 1]
        if name == "v" and max_in_flight is not None and min(usable) > max_in_flight:
            raise ValueError(
                f"valid_schedules: max_in_flight={max_in_flight} cannot hold the {min(usable)} "
                "chunks a microbatch keeps on each rank at once (v chunks per rank)"
            )
    domains = _split_specs({"P": P, "M": M, "v": v}, {})

    @st.composite
    def draw_schedule(draw):
        point = _draw_point(draw, domains, {})
        assume(point is not None and min(point.values()) >= 1)
        p, m, vv = point["P"], point["M"], point["v"]
        place = _placement(draw, placement, p, p * vv)
        split = _split_choice(draw, split_backward, p * vv, m)
        order = _linear_extension(draw, place, m, split, max_in_flight, p)
        progs = tuple(tuple(a for a in order if place[a.stage] == r) for r in range(p))
        return Schedule("random", (("P", p), ("M", m), ("v", vv)), p, p * vv, m, place, progs)

    return draw_schedule()


def _placement(draw, how, P: int, S: int) -> tuple[int, ...]:
    if isinstance(how, tuple):
        if len(how) != S or sorted(set(how)) != list(range(P)):
            raise ValueError(f"placement {how} does not put {S} stages on all of {P} ranks")
        return how
    if how == "looped":
        return looped_placement(P, S)
    if how == "vshape":
        return vshape_placement(P, S)
    if how == "random":
        return tuple(draw(st.permutations(looped_placement(P, S))))
    raise ValueError(f"unknown placement {how!r} (looped, vshape, random or a tuple)")


def _split_choice(draw, split, S: int, M: int) -> dict[tuple[int, int], bool]:
    if split is None:
        return {(s, m): draw(st.booleans()) for s in range(S) for m in range(M)}
    return dict.fromkeys(((s, m) for s in range(S) for m in range(M)), bool(split))


_ATTEMPTS = 4  # random orders tried under a cap before the one that cannot get stuck


def _linear_extension(draw, place, M: int, split, cap: int | None, P: int) -> list[Action]:
    """A random topological order of the compute DAG (one draw per op).  Under a cap, a fully
    random order can get stuck (every rank at its cap waiting on the others): after
    :data:`_ATTEMPTS` such orders, one that starts a microbatch only while fewer than
    ``cap // v`` are in flight (each holds at most v chunks of a rank: the cap never binds)."""
    chunks = max(place.count(r) for r in range(P))  # one microbatch holds them all at once
    if cap is not None and cap < chunks:
        note(f"max_in_flight={cap} cannot hold one microbatch's {chunks} chunks on a rank")
        assume(False)
    for attempt in range(_ATTEMPTS + 1 if cap is not None else 1):
        order = _extension(draw, place, M, split, cap, P, attempt == _ATTEMPTS)
        if order is not None:
            return order
        note(f"stuck under max_in_flight={cap}: drawn again")
    raise AssertionError("unreachable: the last attempt cannot get stuck")


def _extension(draw, place, M, split, cap, P, paced: bool) -> list[Action] | None:
    """One random order; None when it gets stuck under ``cap``.  ``paced``: at most
    ``cap // v`` microbatches in flight (a microbatch starts with its F on stage 0)."""
    S = len(place)
    nxt = {(s, m): OpKind.F for s in range(S) for m in range(M)}
    done: set[tuple] = set()  # (stage, kind, mb) of the ops taken so far
    held = [0] * P
    left = [2 * S] * M  # per microbatch, its forwards and backwards not yet taken
    flying = [0]  # microbatches started and not finished
    most = cap // max(place.count(r) for r in range(P)) if cap is not None else M
    order: list[Action] = []

    def ready(key) -> bool:
        s, m = key
        k = nxt[key]
        if k is OpKind.F and cap is not None and held[place[s]] >= cap:
            return False
        if paced and k is OpKind.F and s == 0 and flying[0] >= most:
            return False
        return all(
            any((p.stage, kk, p.mb) in done for kk in p.kinds)
            for p in deps.inputs(Action(s, k, m), S)
        )

    while nxt:
        cand = sorted(key for key in nxt if ready(key))
        if not cand:
            return None
        key = cand[draw(st.integers(0, len(cand) - 1))]
        s, m = key
        k = nxt.pop(key)
        order.append(Action(s, k, m))
        done.add((s, k, m))
        if k is OpKind.F:
            flying[0] += s == 0
            held[place[s]] += 1
            nxt[key] = OpKind.I if split[key] else OpKind.B
        elif k is OpKind.I:
            nxt[key] = OpKind.W
        else:
            held[place[s]] -= 1
        if k is not OpKind.I:
            left[m] -= 1
            flying[0] -= left[m] == 0
    return order


def mutations(
    schedule: Schedule | st.SearchStrategy[Schedule],
    *,
    max_mutations: int = 1,
    kinds: tuple[str, ...] = ("swap", "move"),
) -> st.SearchStrategy[Schedule]:
    """The schedule with 1..``max_mutations`` edits of one rank's program each: ``swap`` two
    items or ``move`` one item elsewhere.  Items are compute actions or communication groups,
    so lowered schedules mutate too.  Every edit changes the program (the two positions
    differ); a mutant may still be valid.  The edits are recorded with ``hypothesis.note``."""
    if isinstance(kinds, str) or not kinds or set(kinds) - {"swap", "move"}:
        raise ValueError(f"mutations: kinds are 'swap' and/or 'move', got {kinds!r}")
    if not (type(max_mutations) is int and max_mutations >= 1):
        raise ValueError(f"mutations: max_mutations must be at least 1, got {max_mutations!r}")
    if not isinstance(schedule, (Schedule, st.SearchStrategy)):
        raise TypeError(f"mutations takes a Schedule or a strategy of them, got {schedule!r:.60}")
    if isinstance(schedule, st.SearchStrategy):
        return schedule.flatmap(lambda s: mutations(s, max_mutations=max_mutations, kinds=kinds))
    ranks = [r for r, prog in enumerate(schedule.programs) if len(prog) >= 2]
    if not ranks:
        raise ValueError(f"{schedule.name}: no rank has two items to swap or move")

    @st.composite
    def mutate(draw):
        progs = [list(p) for p in schedule.programs]
        for _ in range(draw(st.integers(1, max_mutations))):
            r = draw(st.sampled_from(ranks))
            prog, kind = progs[r], draw(st.sampled_from(kinds))
            i = draw(st.integers(0, len(prog) - 1))
            j = draw(st.integers(0, len(prog) - 2))
            j += j >= i  # j != i
            if kind == "swap":
                prog[i], prog[j] = prog[j], prog[i]
            else:
                prog.insert(j, prog.pop(i))
            note(f"{kind} rank {r}: item {i} <-> {j}")
        return schedule.replace_programs(tuple(tuple(p) for p in progs))

    return mutate()


__all__ = ["shapes", "valid_schedules", "mutations", "parse_domain"]
