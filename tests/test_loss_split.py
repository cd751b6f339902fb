"""``ppir.torch.reference.loss_split``: the whole batch's loss against the mean of its
microbatches' losses, from one output (what ``--verify-grads`` reports when a loss is no mean
over equally weighted samples, e.g. HF's labels with ignore_index=-100)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from ppir.torch.reference import loss_split  # noqa: E402

LOGITS = torch.randn(8, 5, generator=torch.Generator().manual_seed(0))
LABELS = torch.tensor([1, -100, -100, -100, 2, 3, -100, 0])


def test_a_mean_over_equal_samples_splits_exactly():
    split = loss_split(F.cross_entropy, LOGITS, LABELS.clamp(min=0), 4)
    assert abs(split.whole - split.mean) < 1e-6 and not split.differs(1e-5)


def test_a_mean_over_the_labelled_tokens_does_not():
    split = loss_split(F.cross_entropy, LOGITS, LABELS, 2)
    assert abs(split.whole - split.mean) > 1e-3 and split.differs(1e-5)


def test_a_sum_over_a_fixed_count_does():
    def loss(y, t):
        return F.cross_entropy(y, t, reduction="sum") / t.numel()

    split = loss_split(loss, LOGITS, LABELS, 2)
    assert abs(split.whole - split.mean) < 1e-6 and not split.differs(1e-5)


def test_an_output_that_does_not_split_gives_none():
    assert loss_split(F.cross_entropy, LOGITS, LABELS, 3) is None


def test_round_off_of_a_large_mean_is_no_difference():
    # was: a correct mean loss of size 1e6 differs by 1e-2 between the whole batch and its
    # slices in float32, above --tolerance 1e-5, and a failure for any other cause blamed it
    g = torch.Generator().manual_seed(0)
    y, t = torch.randn(48, 777, generator=g) * 1000, torch.randn(48, 777, generator=g)
    split = loss_split(F.mse_loss, y, t, 6)
    assert abs(split.whole - split.mean) > 1e-3  # round-off, above the tolerance
    assert split.eps == torch.finfo(torch.float32).eps and not split.differs(1e-5)
    # a sum (not a mean) over the same output still differs: the pipeline trains on 1/6 of it
    assert loss_split(lambda a, b: F.mse_loss(a, b, reduction="sum"), y, t, 6).differs(1e-5)
