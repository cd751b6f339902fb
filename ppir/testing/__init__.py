"""Property-test your schedules: hypothesis strategies and assertion helpers.

Worked example (docs/testing.md has the long form)::

    from hypothesis import given
    from ppir.testing import assert_schedule_ok, shapes

    @given(shapes("my_schedule.pps", P="2..16", M="P..8P"))
    def test_my_schedule(params):
        assert_schedule_ok("my_schedule.pps", max_peak_activations="P", **params)

Public API
----------
* :func:`assert_schedule_ok`, :func:`check_schedule`, :class:`CheckResult` -- the properties
  (completeness and deadlock freedom via the verifier on the lowered schedule, peak memory,
  optional estimator bounds); no hypothesis needed.
* :func:`shapes`, :func:`valid_schedules`, :func:`mutations`, :func:`property_test` --
  hypothesis strategies, imported on first use (``pip install 'ppir[test]'``; without
  hypothesis they raise ImportError saying so).  A property test's failure is a
  ``PropertyFailure``: an AssertionError that pytest reports as its message alone.
* :class:`ParamSpace`, :func:`parse_domain` -- the ``P=2..16``, ``M=P..8P`` parameter specs.
"""

from __future__ import annotations

from ppir.testing.checks import CheckResult, assert_schedule_ok, check_schedule
from ppir.testing.space import ParamSpace, parse_domain

_LAZY = ("shapes", "valid_schedules", "mutations", "property_test")


def __getattr__(name: str):
    if name == "property_test":
        from ppir.testing.property import property_test

        return property_test
    if name in _LAZY:
        from ppir.testing import strategies

        return getattr(strategies, name)
    if name == "PropertyFailure":  # made with pytest's outcome class, on first use
        from ppir.testing.property import _property_failure

        return _property_failure()
    raise AttributeError(f"module 'ppir.testing' has no attribute {name!r}")


__all__ = [
    "CheckResult",
    "ParamSpace",
    "assert_schedule_ok",
    "check_schedule",
    "parse_domain",
    *_LAZY,
]
