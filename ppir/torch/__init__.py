"""ppir's torch runtime: run verified ppir programs inside real training (needs ``ppir[torch]``).

* :class:`PipelineRuntime` -- the embeddable runtime: your stages, loss, optimizer, data and
  loop; ppir's verified program (:mod:`.runtime`);
* :func:`split_layers`, :func:`find_shared` -- cut a ``ModuleList`` model into stages and find
  tied parameters (:mod:`.split`);
* :func:`to_torch_schedule` -- the same program on torch.distributed.pipelining's runtime
  (:mod:`.interop`);
* :func:`make_mesh`, :func:`init` -- the ``pp x dp`` process groups from torchrun's
  environment (:mod:`.procgroup`).

Importing this package does not import torch: each name loads its module (and torch) on first
use.  ``python -m ppir.run`` (:mod:`.run`) is the rank entry point ``ppir launch`` and torchrun
start.  See docs/executor.md.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "PipelineRuntime": "ppir.torch.runtime",
    "as_plan": "ppir.torch.runtime",
    "split_layers": "ppir.torch.split",
    "find_shared": "ppir.torch.split",
    "Stage": "ppir.torch.split",
    "to_torch_schedule": "ppir.torch.interop",
    "make_mesh": "ppir.torch.procgroup",
    "init": "ppir.torch.procgroup",
    "Mesh": "ppir.torch.procgroup",
    "RuntimeFailure": "ppir.torch.errors",
    "ShapeMismatch": "ppir.torch.errors",
    "ModelError": "ppir.torch.errors",
    "NonFiniteLoss": "ppir.torch.errors",
    "SetupError": "ppir.torch.errors",
    "CommError": "ppir.torch.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'ppir.torch' has no attribute {name!r}")
    try:
        module = importlib.import_module(_EXPORTS[name])
    except ImportError as e:
        if e.name == "torch" or (e.name or "").startswith("torch."):
            raise ImportError(f"ppir.torch.{name} needs PyTorch: pip install 'ppir[torch]'") from e
        raise
    return getattr(module, name)


def __dir__():
    return __all__
