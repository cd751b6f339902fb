"""Search a parameter space for a failing point, then shrink it (``ppir fuzz``; no hypothesis).

:func:`search` tries the low corner of the space, then the high corner, then points drawn from
a seeded RNG (uniform per parameter, under the values drawn before it), until ``examples``
points were checked, or until 1,000 draws in a row found no point not checked before (a
space smaller than ``examples``, used up: ``--over P=2..4 --examples 10**20`` checks 3).
Points a ``require`` line rejects, and points over the op or step cap,
are skipped and do not count.

On the first failure, :func:`shrink` looks for a smaller failing point by coordinate descent:
for each parameter in declaration order, try its smaller values in ascending order (all of them
when there are at most ``_SCAN`` values below the current one, else the lowest ``_SCAN`` and a
geometric ladder up to the current one), with the later parameters kept or clamped into their
new domains, then with the later parameters at their lowest values (``M=P..3P`` failing at
P=4, M=4 also tries P=3, M=3); take the first failing one and start again.  When none fails,
bisect each parameter between the highest smaller value tried (which passed) and its value:
the smallest failing value when failures are monotone in it (``P >= 37`` deadlocks: 37, where
the ladder alone stopped at 50).  The result is a local minimum among the values tried.  The
search is deterministic for a given seed.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from ppir.testing.checks import CheckResult
from ppir.testing.space import ParamSpace

_SCAN = 24
_EXHAUSTED = 1000  # draws in a row that find no new point: the space is used up
Point = tuple[tuple[str, int], ...]


@dataclass
class SearchResult:
    """``failure`` is the smallest failing check found (None when everything held);
    ``first_failure`` the one the search hit first.  Counts are of distinct points."""

    checked: int = 0
    skipped: int = 0
    over_cap: int = 0  # skipped too: larger than the op or step cap
    failure: CheckResult | None = None
    first_failure: CheckResult | None = None
    shrink_steps: int = 0
    cache: dict = field(default_factory=dict, repr=False)


class _Runner:
    def __init__(self, space: ParamSpace, check: Callable[[dict], CheckResult], res, progress):
        self.space, self.check, self.res, self.progress = space, check, res, progress

    def run(self, point: dict[str, int]) -> CheckResult:
        key: Point = tuple(point.items())
        if key not in self.res.cache:
            r = self.check(self.space.env(point))
            self.res.cache[key] = r
            if r.status in ("unsupported", "over-cap"):
                self.res.skipped += 1
                self.res.over_cap += r.status == "over-cap"
            else:
                self.res.checked += 1
            if self.progress:
                self.progress(point, r)
        return self.res.cache[key]


def _complete(space: ParamSpace, point: dict, pick: Callable[[int, int], int]) -> dict | None:
    """Fill in the parameters missing from ``point`` in order; ``pick(lo, hi)`` chooses a value
    index among the domain's values.  None when a domain is empty."""
    out: dict[str, int] = {}
    for name, dom in space.domains:
        env = space.env(out)
        b = dom.bounds(env)
        vals = None if b else dom.values(env)
        lo, hi = b if b else (0, len(vals) - 1)
        if hi < lo:
            return None
        want = point.get(name)
        if want is None:
            v = pick(lo, hi)
            out[name] = v if b else vals[v]
        elif b:
            out[name] = min(max(want, lo), hi)  # clamp into the new domain
        else:
            out[name] = min(vals, key=lambda x: (abs(x - want), x))
    return out


def _candidates(space: ParamSpace, point: dict) -> list[tuple[str, int]]:
    """(name, smaller value) pairs to try, in order."""
    out: list[tuple[str, int]] = []
    for i, (name, dom) in enumerate(space.domains):
        env = space.env({k: point[k] for k, _ in space.domains[:i]})
        b = dom.bounds(env)
        cur = point[name]
        if b is None:
            out.extend((name, x) for x in dom.values(env) if x < cur)
            continue
        lo = b[0]
        below = list(range(lo, min(cur, lo + _SCAN)))
        step = _SCAN
        while lo + step < cur:
            below.append(lo + step)
            step *= 2
        out.extend((name, x) for x in below if x < cur)
    return out


def shrink(
    space: ParamSpace, runner: _Runner, failing: dict[str, int], budget: int = 400
) -> tuple[dict[str, int], int]:
    """A locally minimal failing point below ``failing`` (see the module docstring)."""
    steps = 0
    improved = True
    while improved and budget > 0:
        improved = False
        cands = _candidates(space, failing)
        names = [n for n, _ in space.domains]
        for name, value in cands:
            before = {k: failing[k] for k in names[: names.index(name)]}
            kept = _complete(space, {**failing, name: value}, lambda lo, hi: lo)
            lowest = _complete(space, {**before, name: value}, lambda lo, hi: lo)
            tries = (kept,) if lowest == kept else (kept, lowest)  # later ones clamped, or lowest
            for trial in tries:
                if trial is None or trial == failing or budget <= 0:
                    continue
                budget -= 1
                if runner.run(trial).status == "failed":
                    failing, steps, improved = trial, steps + 1, True
                    break
            if improved or budget <= 0:
                break
        if not improved and budget > 0:  # every rung below passed: bisect the gaps above them
            failing, n, budget = _bisect(space, runner, failing, cands, budget)
            steps, improved = steps + n, n > 0
    return failing, steps


def _bisect(space: ParamSpace, runner: _Runner, failing: dict, cands: list, budget: int):
    """For each parameter, the smallest failing value between the highest candidate below it
    (which passed) and its value, by bisection (exact when failures are monotone in it)."""
    steps = 0
    for name, _ in space.domains:
        below = [x for n, x in cands if n == name and x < failing[name]]
        if not below:
            continue
        ok, bad = max(below), failing[name]
        while bad - ok > 1 and budget > 0:
            mid = (ok + bad) // 2
            trial = _complete(space, {**failing, name: mid}, lambda lo, hi: lo)
            budget -= 1
            if trial is not None and trial[name] == mid and runner.run(trial).status == "failed":
                failing, bad, steps = trial, mid, steps + 1
            else:
                ok = mid
    return failing, steps, budget


def search(
    space: ParamSpace,
    check: Callable[[dict], CheckResult],
    *,
    examples: int = 100,
    seed: int = 0,
    progress=None,
    shrink_budget: int = 400,
) -> SearchResult:
    """Check up to ``examples`` distinct supported points; shrink the first failure."""
    res = SearchResult()
    runner = _Runner(space, check, res, progress)
    rnd = random.Random(seed)
    pickers = [lambda lo, hi: lo, lambda lo, hi: hi]
    attempts = stale = 0
    while res.checked < examples and attempts < 20 * examples + 2 and stale < _EXHAUSTED:
        pick = pickers[attempts] if attempts < 2 else rnd.randint
        attempts += 1
        point = _complete(space, {}, pick)
        if point is None:
            continue
        stale = stale + 1 if tuple(point.items()) in res.cache else 0
        r = runner.run(point)
        if r.status == "failed":
            res.first_failure = r
            small, res.shrink_steps = shrink(space, runner, point, shrink_budget)
            res.failure = res.cache[tuple(small.items())]
            return res
    return res
