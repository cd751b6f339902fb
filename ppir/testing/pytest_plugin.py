"""pytest plugin for schedule property tests (entry point ``pytest11``: ``ppir``).

Installed with ppir, active in every pytest run of the environment (``-p no:ppir`` turns it
off); where plugin autoloading is off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``) or ppir is not
installed, load it with ``-p ppir.testing.pytest_plugin`` or a conftest's ``pytest_plugins``.
The entry point loads :mod:`ppir.testing.pytest_entry`, which loads this module by its module
path, so naming it that way as well is a no-op.
It stays out of the way: it imports nothing heavy and changes no hypothesis profile.

* option ``--ppir-examples N``: hypothesis examples for tests made with
  :func:`ppir.testing.property_test` that do not set ``examples=`` themselves;
* fixture ``schedule_ok``: :func:`ppir.testing.assert_schedule_ok`, for tests that prefer a
  fixture to an import (session-scoped, so hypothesis' ``@given`` accepts it);
* a report header line naming the ppir version when the option is given.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("ppir", "ppir schedule property tests")
    group.addoption(
        "--ppir-examples",
        type=_integer,
        default=None,
        metavar="N",
        help="hypothesis examples per ppir.testing.property_test "
        "(default: the active hypothesis profile)",
    )


def _integer(text: str) -> int:
    """ppir's integer option type (ASCII digits only), imported when an option is given: the
    plugin loads in every pytest session and stays light until then."""
    from ppir.cli.argtypes import integer

    return integer(text)


def pytest_configure(config):
    n = config.getoption("--ppir-examples", default=None)
    if n is not None:
        if n < 1:
            raise pytest.UsageError(f"--ppir-examples must be at least 1, got {n}")
        from ppir.testing import property

        property._DEFAULT_EXAMPLES["n"] = n


def pytest_report_header(config):
    n = config.getoption("--ppir-examples", default=None)
    if n is not None:
        from ppir import __version__

        return f"ppir {__version__}: {n} examples per schedule property test"
    return None


@pytest.fixture(scope="session")
def schedule_ok():
    """``schedule_ok("my.pps", max_peak_activations="P", P=4, M=8)``: see
    :func:`ppir.testing.assert_schedule_ok`."""
    from ppir.testing import assert_schedule_ok

    return assert_schedule_ok
