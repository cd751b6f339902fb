"""ppir.torch.objects: objects between ranks without numpy, which ppir[torch] does not install.

The fresh-venv check (torch and ppir[torch] alone) failed a 2-rank `ppir launch
--verify-grads` with `RuntimeError: Numpy is not available` once the verifier gathered its
lines with torch's `all_gather_object`; `ppir profile` had gathered its samples with
`gather_object`, which reads them back the same way."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from ppir.torch.objects import all_gather_objects  # noqa: E402


def test_objects_come_back_whole_without_numpy(one_rank_group, monkeypatch):
    def no_numpy(self, *args, **kwargs):
        raise RuntimeError("Numpy is not available")

    monkeypatch.setattr(torch.Tensor, "numpy", no_numpy)
    obj = {"pieces": [{"F": [1e-3, 2e-3]}], "text": "rank 0: é", "none": None, "big": "x" * 70000}
    assert all_gather_objects(obj) == [obj]
    assert all_gather_objects(None) == [None]
    # torch's own way needs numpy: the reason for this module
    got = [None]
    with pytest.raises(RuntimeError, match="Numpy is not available"):
        dist.all_gather_object(got, obj)
