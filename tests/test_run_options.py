"""The ranks of ``ppir.run`` compare their run options (``ppir.torch.run_options``): nodes
started with another ``--steps`` or ``--module-opt`` used to train together and then time out
("is it stuck?") or fail in the model."""

from __future__ import annotations

from types import SimpleNamespace

from ppir.torch.run_options import describe, differences, option_hashes


def args(**kw):
    base = dict(
        steps=4, lr=None, dp=None, module_opt=["layers=2"], verify_grads=False,
        verify_steps=None, tolerance=1e-5, on_nonfinite="raise", tied="sum",
        module="/a/m.py", timeout=60.0, device="auto",
    )  # fmt: skip
    return SimpleNamespace(**{**base, **kw})


def test_alike_options_agree_whatever_differs_per_node():
    every = [option_hashes(args()), option_hashes(args(module="/b/m.py", timeout=9.0))]
    assert differences(every) == []


def test_another_steps_and_module_opt_are_named_with_the_ranks():
    every = [option_hashes(args()), option_hashes(args()), option_hashes(args(steps=6))]
    every.append(option_hashes(args(steps=6, module_opt=["layers=3"])))
    diffs = differences(every)
    assert diffs == [("--steps", [2, 3]), ("--module-opt", [3])]
    text = describe(2, args(steps=6), diffs)
    assert text == (
        "rank 2: the ranks were started with different options: --steps differs between "
        "rank 0 and ranks 2, 3 (and --module-opt) (rank 2's: 6); start every node with the "
        "same arguments (only --node-rank differs)"
    )


def test_an_option_left_at_its_default_is_not_given():
    """Node 0 with -n 2, node 1 with -n 4 --dp 2: rank 0's --dp read 'None'."""
    every = [option_hashes(args()), option_hashes(args(dp=2))]
    text = describe(0, args(), differences(every))
    assert "--dp differs between rank 0 and rank 1 (rank 0's: not given)" in text
