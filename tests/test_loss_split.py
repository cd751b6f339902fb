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
    whole, mean = loss_split(F.cross_entropy, LOGITS, LABELS.clamp(min=0), 4)
    assert abs(whole - mean) < 1e-6


def test_a_mean_over_the_labelled_tokens_does_not():
    whole, mean = loss_split(F.cross_entropy, LOGITS, LABELS, 2)
    assert abs(whole - mean) > 1e-3


def test_a_sum_over_a_fixed_count_does():
    def loss(y, t):
        return F.cross_entropy(y, t, reduction="sum") / t.numel()

    whole, mean = loss_split(loss, LOGITS, LABELS, 2)
    assert abs(whole - mean) < 1e-6


def test_an_output_that_does_not_split_gives_none():
    assert loss_split(F.cross_entropy, LOGITS, LABELS, 3) is None
