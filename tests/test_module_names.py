"""ppir.torch.module_names: the names a model file binds at its top level, read without running
it, so that 'ppir launch' refuses a file that lacks the contract's functions before any process
starts; only what the source says for certain."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppir.torch.module_names import top_level_names
from ppir.torch.signatures import REQUIRED

ROOT = Path(__file__).resolve().parents[1]


def names(tmp_path, text: str):
    f = tmp_path / "m.py"
    f.write_text(text)
    return top_level_names(f)


def test_every_way_a_module_binds_a_name_at_its_top_level(tmp_path):
    bound, defined = names(
        tmp_path,
        "import torch.nn as nn, os.path\n"
        "from functools import partial as p\n"
        "try:\n"
        "    import fast\n"
        "except ImportError as err:\n"
        "    def build_stage(s, n): pass\n"
        "else:\n"
        "    build_stage = fast.build\n"
        "if True:\n"
        "    class Net: pass\n"
        "for i, (j, k) in []: pass\n"
        "with open('x') as (fh):\n"
        "    pass\n"
        "a, *rest = b = 1, 2\n"
        "total: int = 0\n"
        "print(made := 1)\n"
        "loss_fn = p(print)\n"
        "def _private(): pass\n"
        "def outer():\n"
        "    inner = 1\n"
        "class K:\n"
        "    attr = 1\n",
    )
    assert {"nn", "os", "p", "fast", "err", "build_stage", "Net", "i", "j", "k", "fh", "a",
            "rest", "b", "total", "made", "loss_fn", "outer", "K", "_private"} <= bound  # fmt: skip
    assert "inner" not in bound and "attr" not in bound and "make_batch" not in bound
    assert defined == {"build_stage", "Net", "_private", "outer", "K"}


@pytest.mark.parametrize(
    "text",
    [
        "from mylib import *\n",
        "def __getattr__(name): pass\n",
        "globals()['make_batch'] = print\n",
        "exec('def loss_fn(y, t): pass')\n",
        "match 1:\n    case x: pass\n",
        "def broken(:\n",
        "locals().update(make())\n",
        "import sys\nsys.modules[__name__].build_stage = print\n",
        "import sys\nfor n in 'ab': sys.modules[__name__].__dict__[n] = print\n",
    ],
    ids=[
        "star-import",
        "module-getattr",
        "globals",
        "exec",
        "match",
        "syntax-error",
        "locals",
        "sys-modules",
        "module-dict",
    ],  # fmt: skip
)
def test_a_source_that_does_not_say_for_certain_is_left_to_the_ranks(tmp_path, text):
    assert names(tmp_path, text) is None


def test_every_shipped_model_binds_the_contract(tmp_path):
    """No false refusal: each example model (they run in the suite) is seen to bind them."""
    models = [
        f for f in sorted((ROOT / "examples").glob("*.py")) if "def build_stage" in f.read_text()
    ]
    assert len(models) >= 2, models
    for f in models:
        seen = top_level_names(f)
        assert seen is not None and set(REQUIRED) <= seen[0], f


def test_a_name_a_function_declares_global_counts_as_bound(tmp_path):
    """A file whose setup function binds the contract (global build_stage, ...; then called at
    the top level) was refused before launch, though its ranks import it fine."""
    bound, _ = names(
        tmp_path,
        "def _setup():\n"
        "    global build_stage, make_batch, loss_fn\n"
        "    def build_stage(s, n): pass\n"
        "    make_batch = loss_fn = print\n"
        "_setup()\n",
    )
    assert set(REQUIRED) <= bound
