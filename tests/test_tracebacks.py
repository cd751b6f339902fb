"""The traceback printed for an exception in the user's own code starts at the last of ppir's
frames that called into it (ppir.tracebacks): a model file with a missing import showed ppir's
runner and importlib's frozen frames first (a new user's trial)."""

from __future__ import annotations

import traceback

import pytest

pytest.importorskip("torch")

from ppir.torch.model import load_model  # noqa: E402
from ppir.tracebacks import user_traceback  # noqa: E402


def _from_ppir(exc: BaseException) -> BaseException:
    """``exc`` as a rank sees it: its traceback starting in ppir (this test's frame cut)."""
    exc.__traceback__ = exc.__traceback__.tb_next
    return exc


def _load(path):
    with pytest.raises(Exception) as e:
        load_model(str(path))
    return _from_ppir(e.value)


def test_a_missing_import_in_the_model_file_starts_at_ppir_s_last_frame(tmp_path):
    model = tmp_path / "needs_more.py"
    model.write_text("import torch\nimport not_a_module_ppir_knows\n")
    text = user_traceback(_load(model))
    frames = [ln for ln in text.splitlines() if ln.startswith('  File "')]
    assert "<frozen" not in text, text
    assert len(frames) == 2 and "ppir" in frames[0] and 'needs_more.py", line 2' in frames[1]
    assert text.rstrip().endswith("No module named 'not_a_module_ppir_knows'")


def test_a_syntax_error_in_the_model_file_is_its_file_line_and_caret(tmp_path):
    model = tmp_path / "broken.py"
    model.write_text("def build_stage(stage, n):\n    return (\n")
    text = user_traceback(_load(model))
    assert not text.startswith("Traceback"), text
    assert 'broken.py", line 2' in text and "SyntaxError" in text


def test_frames_below_the_user_s_are_kept_and_ppir_s_own_bug_keeps_every_frame(tmp_path):
    model = tmp_path / "configured.py"
    model.write_text(
        "def build_stage(stage, n): ...\ndef make_batch(step): ...\ndef loss_fn(y, t): ...\n"
        "def configure(**kw):\n    raise ValueError('width must be even')\n"
    )
    with pytest.raises(ValueError) as e:
        load_model(str(model), {"width": 3})
    text = user_traceback(_from_ppir(e.value))
    frames = [ln for ln in text.splitlines() if ln.startswith('  File "')]
    assert len(frames) == 2 and 'configured.py", line 5' in frames[1], text
    from ppir.torch.model import parse_options  # ppir's own error: no frame of the user's

    with pytest.raises(Exception) as e:
        parse_options(["no-equals-sign"])
    bug = _from_ppir(e.value)
    assert user_traceback(bug) == "".join(traceback.format_exception(bug))
