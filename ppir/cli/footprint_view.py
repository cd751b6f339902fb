"""Text and JSON views of a :class:`ppir.analysis.footprint.Footprint` shared by the commands
that print whole per-rank memory (``ppir analyze --model``, the cost backend, ``ppir tune``)."""

from __future__ import annotations

from ppir.analysis.footprint import TERMS, Footprint
from ppir.analysis.measured_footprint import MeasuredFootprint
from ppir.analysis.models import ModelShape, model_fields
from ppir.analysis.units import fmt_memory, size_unit
from ppir.cli.output import table


def describe_setup(m: ModelShape, recompute: str) -> str:
    """One line: what the bytes assume (precision, optimizer, sharding, attention, recompute)."""
    from ppir.analysis.footprint import param_bytes

    bpp = param_bytes(m)
    bpp_s = f"{float(bpp):.4g}"
    zero = {0: "no ZeRO", 1: "ZeRO-1 (optimizer sharded)", 2: "ZeRO-2 (optimizer, gradients)"}
    shards = zero[m.zero] + (" (no effect at dp=1)" if m.zero and m.dp == 1 else "")
    return (
        f"{m.dtype} parameters, {m.grad_dtype} gradients, {m.optimizer}"
        f"{' with fp32 master weights' if m.dtype_bytes < 4 else ''}, dp={m.dp} {shards}: "
        f"{bpp_s} bytes per parameter; tp={m.tp}{' (sequence parallel)' if m.tp > 1 else ''}; "
        f"{'flash' if m.flash else 'materialised'} attention, recompute {recompute}"
    )


def footprint_lines(fp: Footprint | MeasuredFootprint) -> list[str]:
    """The per-rank table with the largest term, and the worst rank; in GiB, or in MiB or KiB
    when the worst rank holds less than one (a small model measured by ``ppir profile``)."""
    head = ["rank", *TERMS, "total", "largest"]
    rows = [head]
    worst = fp.worst.rank
    scale, unit = size_unit(float(fp.worst.total))
    for r in fp.per_rank:
        cells = [f"{r.rank}{'*' if r.rank == worst else ''}"]
        cells += [f"{float(getattr(r, t)) / scale:.2f}" for t in (*TERMS, "total")]
        rows.append(cells + [r.dominant])
    measured = isinstance(fp, MeasuredFootprint)
    setup = (
        f"measured by ppir profile ({fp.source}): parameters and the optimizer's state as the "
        "model holds them (frozen ones and buffers included), one gradient per trainable parameter"
        if measured
        else describe_setup(fp.model, fp.recompute)
    )
    out = [
        f"whole memory per rank in {unit} ({setup}"
        + (f"; {fp.copies} copies of the model's stages" if fp.copies > 1 else "")
        + "):"
    ]
    out.extend(table(rows, align=">" * (len(head) - 1) + "<").splitlines())
    w = fp.worst
    out.append(
        f"* peak: rank {w.rank}, {fmt_memory(float(w.total))}, largest term {w.dominant} "
        f"({float(getattr(w, w.dominant)) / scale:.2f} {unit}); total adds the activation and "
        "buffer peaks; activations are "
        + (
            "what autograd saved for one forward of each stage in the profile"
            if measured
            else "the layers' plus the first stage's token ids and embedding dropout mask and "
            "the last stage's logits"
            if fp.model.vocab
            else "the layers' (no vocabulary: no embedding or logits)"
        )
    )
    return out


def footprint_json(fp: Footprint | MeasuredFootprint) -> dict:
    """``{"per_rank": [{rank, params, grads, optimizer, activations, buffers, total, largest}],
    "worst_rank", "bytes_per_param", ...}``; sizes in bytes."""
    per_rank = [{"rank": r.rank, **r.to_json(), "largest": r.dominant} for r in fp.per_rank]
    if isinstance(fp, MeasuredFootprint):  # measured sizes: no shape, no bytes per parameter
        return {"measured": fp.source, "worst_rank": fp.worst.rank, "per_rank": per_rank}
    return {
        "bytes_per_param": float(fp.bytes_per_param),
        "recompute": fp.recompute,
        "copies": fp.copies,
        "stage_layers": [z.layers for z in fp.stage_sizes],
        "worst_rank": fp.worst.rank,
        "per_rank": per_rank,
    }


def model_json(m: ModelShape) -> dict:
    """The model's name and every spec field (``ffn``, ``kv_heads`` resolved)."""
    return {
        "name": m.name,
        **model_fields(m),
        "ffn": m.ffn_hidden,
        "kv_heads": m.kv,
    }
