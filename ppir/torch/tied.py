"""Parameters tied across stages (an embedding and the head that reuses it): which of them
this rank holds, and with which other ranks it must keep them identical.

Contract of :func:`tied_copies`: ``shared`` is the runtime's argument (None: the entries the
stage modules carry as ``ppir_shared``, as :func:`ppir.torch.split_layers` attaches them;
``"refuse"``: :class:`SetupError` naming the first shared parameter, see :func:`tied_refusal`;
else a list of ``{"name": ..., "holders": [[stage, parameter name], ...]}``).  The result has
one :class:`TiedCopy` per entry of which this rank holds a copy that must be kept equal to
another (on another rank, or a second tensor on this one); a holder outside the plan's stages
or a missing parameter is a :class:`SetupError` naming it.
"""

from __future__ import annotations

from ppir.torch.errors import SetupError


class TiedCopy:
    """One tied parameter as this rank sees it: the local copies and the other holders."""

    def __init__(self, name: str, local: list, others: list[int]):
        self.name, self.local, self.others = name, local, others  # others: global ranks

    def redundant(self, rank: int) -> list:
        """The local copies that do not stand for the parameter on global rank ``rank``: all
        but the first on the lowest holder, all on the others.  The one left is the copy that
        clipping counts and that keeps the copies' common gradient through a no_sync window."""
        lowest = not self.others or min(self.others) > rank
        return self.local[1:] if lowest else list(self.local)


def tied_refusal(entry: dict, placement: list[int]) -> str:
    """Why ``shared="refuse"`` stops at the shared parameter ``entry`` (``placement``: the
    rank of each stage): copies on several ranks, or, when every holder is on one rank (a V
    placement), one tensor that needs no gradient sum."""
    (s0, n0), *rest = entry["holders"]
    ranks = {placement[s] for s, _ in entry["holders"]}
    undo = "drop shared='refuse', or --tied refuse on the command line"
    if len(ranks) == 1:
        where = ", ".join(f"{n!r} of stage {s}" for s, n in rest)
        return (
            f"parameter {entry['name']!r} is shared: {n0!r} of stage {s0} is the same tensor "
            f"as {where}, all on rank {ranks.pop()} (one tensor: no gradient crosses ranks for "
            f"it); refusing a model with shared parameters ({undo}, to run it as it is)"
        )
    where = ", ".join(f"{n!r} of stage {s} (rank {placement[s]})" for s, n in rest)
    return (
        f"parameter {entry['name']!r} is shared: {n0!r} of stage {s0} (rank "
        f"{placement[s0]}) is the same tensor as {where}; refusing to run it untied "
        f"({undo}, to keep the copies identical by summing their gradients)"
    )


def tied_copies(shared, rt) -> list[TiedCopy]:
    """This rank's tied copies (see the module docstring); ``rt`` is the runtime being built
    (its ``plan``, ``stages``, ``stage_ids``, ``rank``, ``pp_rank`` and ``_to_global``)."""
    if shared is None:
        shared = []
        for m in rt.stages:
            for e in getattr(m, "ppir_shared", ()):
                if e not in shared:
                    shared.append(e)
    elif shared == "refuse":
        for m in rt.stages:
            for e in getattr(m, "ppir_shared", ()):
                raise SetupError(tied_refusal(e, rt.plan["placement"]))
        return []
    out = []
    placement = rt.plan["placement"]
    for e in shared:
        holders = [(int(s), str(n)) for s, n in e["holders"]]
        bad = [s for s, _ in holders if not 0 <= s < rt.plan["stages"]]
        if bad:
            raise SetupError(f"shared parameter {e['name']!r}: no stage {bad[0]} in the plan")
        local = []
        for s, name in holders:
            if s in rt.stage_ids:
                mod = rt.stages[rt.stage_ids.index(s)]
                try:
                    p = mod.get_parameter(name)
                except AttributeError:
                    raise SetupError(
                        f"rank {rt.rank}: shared parameter {e['name']!r}: stage {s} has "
                        f"no parameter {name!r}"
                    ) from None
                if all(p is not q for q in local):
                    local.append(p)
        others = sorted({placement[s] for s, _ in holders} - {rt.pp_rank})
        if local and (others or len(local) > 1):
            out.append(TiedCopy(e["name"], local, [rt._to_global(r) for r in others]))
    return out
