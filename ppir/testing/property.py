"""A ready-made pytest test for a schedule (imported lazily by :mod:`ppir.testing`):
:func:`property_test` draws shapes with :func:`ppir.testing.strategies.shapes` and checks each
with :func:`ppir.testing.assert_schedule_ok`."""

from __future__ import annotations

import functools
import os

from hypothesis import Phase, given, settings

from ppir.diagnostics import PpirError
from ppir.testing.checks import assert_schedule_ok, property_keywords
from ppir.testing.strategies import shapes

_DEFAULT_EXAMPLES: dict[str, int | None] = {"n": None}  # set by the pytest plugin's option


@functools.cache
def _property_failure() -> type:
    """An AssertionError that pytest reports as its message alone, as ``pytest.fail(msg,
    pytrace=False)`` is (pytest showed ppir's frame of the property test, marked at its
    ``__tracebackhide__`` line, under hypothesis' trimmed traceback)."""
    import pytest

    class PropertyFailure(AssertionError, pytest.fail.Exception):
        def __init__(self, message: str):
            pytest.fail.Exception.__init__(self, message, pytrace=False)

    PropertyFailure.__module__ = "ppir.testing"  # the summary line: ppir.testing.PropertyFailure
    PropertyFailure.__qualname__ = "PropertyFailure"
    return PropertyFailure


def property_test(
    schedule: str | os.PathLike, *, over: dict, examples: int | None = None, **checks
):
    """A pytest test function: for every shape drawn from ``over`` (as in :func:`shapes`),
    :func:`assert_schedule_ok` holds with ``checks`` (``max_peak_activations=``, ...).

    Assign it to a ``test_*`` name in a test module.  ``examples`` sets hypothesis'
    ``max_examples`` (default: ``--ppir-examples`` with the plugin, else the active profile).
    The test has no deadline, and no explain phase (the lines it lists would be ppir's).
    A mistake in the arguments is a ppir error (or a TypeError/ValueError) raised here, from
    the line that defines the test, without ppir's own frames under it."""
    __tracebackhide__ = True
    try:
        return _property_test(schedule, over, examples, checks)
    except (PpirError, TypeError, ValueError) as e:
        raise e.with_traceback(None) from None  # pytest shows the user's line and the message


def _property_test(schedule, over: dict, examples: int | None, checks: dict):
    from ppir.frontend.expand import check_given
    from ppir.frontend.loader import declared_params
    from ppir.testing.checks import check_bound_names, load_module, schedule_path

    path = schedule_path(schedule, "property_test")
    property_keywords(path, checks)
    for option in ("max_peak_activations", "max_bubble", "max_step_time"):
        # now, as 'ppir fuzz' does before its first check: it came as a falsifying example
        check_bound_names(option, checks.get(option), declared_params(path), os.fspath(schedule))
    if examples is not None and not (type(examples) is int and examples >= 1):
        raise ValueError(f"property_test: examples must be at least 1, got {examples!r}")
    if not hasattr(over, "items"):  # a mapping; was "AttributeError: 'str' ... 'items'"
        raise TypeError(f"property_test: over takes a dict, such as {{'P': '2..8'}}, got {over!r}")
    # was a falsifying example, 'give it with M=...', with hypothesis' frames around it
    check_given(load_module(path), {*over, *checks}, lambda n: f"over={{{n!r}: ...}} or {n}=...")
    for k in over:  # was "assert_schedule_ok() got multiple values for keyword argument 'P'"
        if k in checks:
            raise TypeError(
                f"property_test: {k!r} is drawn from over={{{k!r}: {over[k]!r}}} and held at "
                f"{k}={checks[k]!r}; give it in one of them"
            )

    def test(params):
        __tracebackhide__ = True
        try:
            assert_schedule_ok(path, **checks, **params)
            return
        except AssertionError as e:
            failure = str(e)
        raise _property_failure()(failure)  # the shape and the diagnostic, no ppir frames

    # hypothesis names the function in 'Failing test case: NAME(params=...)'
    stem = os.path.splitext(os.path.basename(path))[0]
    name = "check_" + "".join(c if c.isalnum() else "_" for c in stem)
    test.__name__ = test.__qualname__ = name if name.isidentifier() else "check_schedule"
    # hypothesis keys its example database on the function's source and signature, the same
    # for every property_test: without its own key, one test's saved failure replays in another
    from hypothesis.internal.reflection import get_pretty_function_description as describe

    fixed = sorted((k, describe(v) if callable(v) else repr(v)) for k, v in checks.items())
    key = repr((os.path.abspath(path), sorted(over.items()), fixed))  # stable across runs
    test._hypothesis_internal_add_digest = key.encode()
    test = given(shapes(path, **over))(test)
    n = examples or _DEFAULT_EXAMPLES["n"]
    test.__doc__ = f"{path}: for all {over}, verifies" + (f" and {checks}" if checks else "")
    # Checks of large shapes take seconds: never a deadline; explain's lines are ppir's checks.
    phases = [p for p in settings().phases if p is not Phase.explain]  # the profile's others
    return settings(deadline=None, phases=phases, **({"max_examples": n} if n else {}))(test)


__all__ = ["property_test"]
