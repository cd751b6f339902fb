"""The one line ``ppir launch`` prints for a rank's failure (``ppir.torch.failures.describe``)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")


def test_an_exception_without_a_message_is_its_type_alone():
    from ppir.torch.failures import describe

    assert describe(RuntimeError(), 1) == "rank 1: RuntimeError"  # was "RuntimeError: "
    assert describe(KeyboardInterrupt(), 0) == "rank 0: KeyboardInterrupt"
    assert describe(ValueError("boom"), 1) == "rank 1: ValueError: boom"
