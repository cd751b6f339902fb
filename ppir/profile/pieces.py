"""The pieces ``ppir profile`` builds (:func:`build`), and what it records of a piece beyond its
times: the parameters it shares with other stages.  A piece is called and its values moved as
the runtime's executor does (:mod:`ppir.torch.values`)."""

from __future__ import annotations

import torch

from ppir.torch.model import optimizer_state_bytes


def shared_bytes(model, pieces: list, first: int) -> list[list[dict]]:
    """Per piece, the parameters it shares with other stages, as the stages declare them to
    the runtime (``stage.ppir_shared``, :func:`ppir.torch.split_layers`), each listed by its
    lowest holder only (pieces are stages ``first``, ``first + 1``, ...): ``{"stages": its
    holders, "param_bytes" (trainable) or "frozen_bytes", "optimizer_bytes"}`` (the model's
    optimizer state for it, -1 when the optimizer cannot be made: as
    :func:`~ppir.torch.model.optimizer_state_bytes`).  Run after the measurements (the
    optimizer steps)."""
    out: list[list[dict]] = [[] for _ in pieces]
    for j, mod in enumerate(pieces):
        for e in getattr(mod, "ppir_shared", ()) or ():
            try:
                holders = {int(s): str(n) for s, n in e["holders"]}
            except (KeyError, TypeError, ValueError):
                continue
            if len(holders) < 2 or min(holders) != first + j:
                continue  # recorded by its lowest holder, once
            try:
                p = mod.get_parameter(holders[first + j])
            except AttributeError:
                continue
            size = p.numel() * p.element_size()
            trains = p.requires_grad
            out[j].append(
                {
                    "stages": sorted(holders),
                    "param_bytes": size if trains else 0,
                    "frozen_bytes": 0 if trains else size,
                    "optimizer_bytes": optimizer_state_bytes(model, [p]) if trains else 0,
                }
            )
    return out


def build(model, j: int, n: int, device):
    """Piece ``j`` of ``n`` (``model.build_stage``) on ``device``; a ProfileError when the
    model does not return a torch module."""
    from ppir.profile.errors import ProfileError

    mod = model.build_stage(j, n)
    if not isinstance(mod, torch.nn.Module):
        raise ProfileError(
            f"build_stage({j}, {n}) returned {type(mod).__name__}, expected a torch.nn.Module"
        )
    return mod.to(device)
