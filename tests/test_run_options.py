"""The ranks of ``ppir.run`` compare their run options (``ppir.torch.run_options``): nodes
started with another ``--steps`` or ``--module-opt`` used to train together and then time out
("is it stuck?") or fail in the model."""

from __future__ import annotations

from types import SimpleNamespace

from ppir.torch.run_options import agreed_values, describe, differences, option_hashes


def args(**kw):
    base = dict(
        steps=4, lr=None, dp=None, module_opt=["layers=2"], verify_grads=False,
        verify_steps=None, tolerance=1e-5, on_nonfinite="raise", tied="sum",
        module="/a/m.py", timeout=60.0, device="auto",
    )  # fmt: skip
    return SimpleNamespace(**{**base, **kw})


def values(a, dp=1):
    return agreed_values(a, dp)


def hashes(a, dp=1):
    return option_hashes(values(a, dp))


def test_alike_options_agree_whatever_differs_per_node():
    every = [hashes(args()), hashes(args(module="/b/m.py", timeout=9.0))]
    assert differences(every) == []


def test_options_are_compared_as_they_act_not_as_they_were_typed():
    """The review found equal runs refused: --dp left out against the --dp it resolves to,
    --lr left out against the default rate, --module-opt in another order, and --tolerance or
    --verify-steps where no node verifies gradients."""
    two = args(module_opt=["layers=2", "d_model=32"])
    alike = [
        (args(), 2, args(dp=2), 2),
        (args(), 1, args(lr=0.01), 1),
        (two, 1, args(module_opt=["d_model=32", "layers=2"]), 1),
        (args(), 1, args(tolerance=1e-3, verify_steps=3), 1),
    ]
    for a, da, b, db in alike:
        assert differences([hashes(a, da), hashes(b, db)]) == [], (a, b)
    on = dict(verify_grads=True)
    assert differences([hashes(args(**on)), hashes(args(**on, tolerance=1e-3))]) == [
        ("--tolerance", [1])
    ]
    assert differences([hashes(args(), 1), hashes(args(), 2)]) == [("--dp", [1])]


def test_another_steps_and_module_opt_are_named_with_both_values():
    runs = [args(), args(), args(steps=6), args(steps=6, module_opt=["layers=3"])]
    diffs = differences([hashes(a) for a in runs])
    assert diffs == [("--steps", [2, 3]), ("--module-opt", [3])]
    text = describe(2, diffs, [values(a) for a in runs])
    assert text == (
        "rank 2: the ranks were started with different options: --steps differs between "
        "rank 0 and ranks 2, 3 (and --module-opt): rank 0 has 4, rank 2 6; start every node "
        "with the same arguments (only --node-rank differs)"
    )
    diffs = differences([hashes(runs[0]), hashes(runs[3])])[1:]  # --module-opt alone
    text = describe(0, diffs, [values(runs[0]), values(runs[3])])
    assert "rank 0 has 'layers=2', rank 1 'layers=3'" in text
