"""``ppir sweep --over``: the one parameter swept and its values."""

from __future__ import annotations

from ppir.diagnostics import count, error
from ppir.frontend.expand import check_param_range
from ppir.frontend.limits import read_int
from ppir.testing.space import constant_bounds
from ppir.testing.value_lists import refuse_repeats, split_option, value_items

MAX_VALUES = 1_000  # the most values (rows) of one sweep; each compiles the schedule


def parse_over(text: str) -> tuple[str, list[int]]:
    """(NAME, values) of ``--over NAME=V1,V2,...`` or ``NAME=LO..HI`` (every integer from LO to
    HI, inclusive, as fuzz's ranges; constant ends), read as fuzz's --over
    (ppir.testing.space) and -D's values are; at most MAX_VALUES of them, a row each."""
    name, vals = split_option(text, "NAME=V1,V2,... or NAME=LO..HI", "bad-usage")
    if ".." in vals:
        lo, hi = constant_bounds(vals, f"--over {text}")
        _check_rows(text, hi - lo + 1)
        _check_range(name, [lo, hi])
        return name, list(range(lo, hi + 1))
    items = value_items(vals, f"--over {text}", "bad-usage")
    values = []
    for x in items:
        try:
            values.append(read_int(x))  # as -D's values: ASCII digits ('٤' is no 4 here)
        except ValueError as e:  # the first value refused, in -D's words
            raise error("bad-usage", f"--over {text}: each value of '{name}' {e}") from None
    refuse_repeats(values, f"--over {text}", "bad-usage")
    _check_rows(text, len(values))
    _check_range(name, values)
    return name, values


def _check_range(name: str, values: list[int]) -> None:
    """A usage error naming ``--over`` for a value past ppir's integers (the loader's check,
    which named ``-D``, an option the command line did not give)."""
    for v in values:
        check_param_range(name, v, "--over", "bad-usage")


def _check_rows(text: str, n: int) -> None:
    """A usage error when ``--over`` gives more than MAX_VALUES values (a row each)."""
    if n > MAX_VALUES:
        raise error(
            "bad-usage",
            f"--over {text} gives {count(n, 'value')}; a sweep measures at most "
            f"{MAX_VALUES:,} (a row each)",
            hints=["narrow the range or list the values, e.g. --over M=4,8,16"],
        )
