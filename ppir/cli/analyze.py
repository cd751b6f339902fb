"""ppir analyze: activation memory and point-to-point traffic of a schedule, from its IR."""

from __future__ import annotations

from fractions import Fraction

from ppir.analysis.analyze import analyze_compiled
from ppir.analysis.memory import ANALYSIS_FORMAT
from ppir.analysis.model_spec import parse_model_spec, spec_help
from ppir.analysis.models import RECOMPUTE_MODES
from ppir.analysis.units import microbatch_json
from ppir.cli.argtypes import integer
from ppir.cli.common import (
    add_compile_arguments,
    add_schedule_arguments,
    compile_from_args,
    emit_json,
    print_report,
)
from ppir.cli.cost_options import add_stage_layers_argument
from ppir.cli.footprint_view import footprint_json, footprint_lines, model_json
from ppir.cli.output import schedule_line, table
from ppir.diagnostics import EXIT_INVALID, error

NAME = "analyze"
HELP = "peak activation memory per rank and point-to-point traffic (table or JSON)"
DESCRIPTION = """Compute, from the lowered IR, each rank's peak in-flight activations (in chunk
activations and in A = one microbatch's activations of one rank share, L/P layers), the op where
the peak occurs, the memory curve, received-but-not-consumed buffers, and the point-to-point
messages per microbatch (same-rank stage hand-offs are local, not messages).  F allocates, B
frees; with split backward I frees --i-fraction of a chunk and W the rest.

With --model, sizes are in bytes (Korthikanti et al.'s per-layer formula, generalised to GQA,
SwiGLU and flash attention) and each rank's whole memory is added: parameters, gradients and
optimizer state of its stages (embedding on the first, head on the last), peak activations and
receive buffers, with the largest term (ppir.analysis.footprint; docs/analysis.md).  The model
also gives the costs that plan the lowering, as 'ppir compile --model' does, so both analyse the
same program.  --layers L checks that L splits evenly into the P*v stages.

examples:
  ppir analyze 1f1b -D P=4 -D M=8
  ppir analyze interleaved_1f1b -D P=4 -D M=8 -D v=2 --format json
  ppir analyze interleaved_1f1b -D P=8 -D M=16 -D v=2 --model llama3-70b,tp=8 --recompute selective
  ppir analyze 1f1b -D P=8 -D M=32 --model llama3-70b,tp=8,dp=4,zero=1,seq=4096
  ppir analyze interleaved_1f1b -D P=8 -D v=4 --layers 80      # error: lists the v that work
  ppir analyze gpipe -D P=4 --curve

JSON: the versioned "ppir.analysis/2" object (schedule, params, ranks, stages, microbatches
per step and microbatches_per_pipeline, per_rank[], p2p{}); fractions are given as numbers
and, under *_exact keys, as exact "p/q" strings.  With --model each per_rank[] entry has
memory{params, grads, optimizer, activations, buffers, total} in bytes, and "footprint" holds
the per-rank table with the largest term.
"""

_BARS = " ▁▂▃▄▅▆▇█"


def add_arguments(p):
    add_schedule_arguments(p)
    p.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="text (default): tables; json: ppir.analysis/2",
    )
    add_model_arguments(p)
    add_stage_layers_argument(p)
    p.add_argument(
        "--i-fraction",
        metavar="F",
        help="the fraction of a chunk activation that I frees (W frees the rest), e.g. 1/2, "
        "at most 1 (negative, written --i-fraction=-1/4: I keeps more than it frees, as under "
        "full recomputation, where it is about -20); "
        "default: ppir's runtime split at the model's shape (GPT-3 175B's "
        "when no model is given)",
    )
    p.add_argument("--curve", action="store_true", help="text: draw each rank's memory curve")
    add_compile_arguments(p, model=False)


def add_model_arguments(p, model_help=None, recompute_help=None, layers_help=None) -> None:
    """--model, --recompute and --layers (shared with 'ppir sweep', which says in its own
    help texts what they change there)."""
    p.add_argument(
        "--model",
        metavar="SPEC",
        help=model_help
        or "model shape for bytes: a preset (gpt3-175b, llama3-8b, llama3-70b, "
        "llama3-405b, gpt2-xl), optionally with overrides, or key=value pairs: "
        "e.g. llama3-70b,tp=8,seq=4096 or layers=32,hidden=4096,heads=32,seq=2048,"
        f"mbs=1,dtype=bf16,tp=1; {spec_help()}",
    )
    p.add_argument(
        "--recompute",
        choices=RECOMPUTE_MODES,
        default="none",
        help=recompute_help or "activation recomputation (default none)",
    )
    p.add_argument(
        "--layers",
        type=integer,
        metavar="L",
        help=layers_help
        or "the model's transformer layers, a count (default: the model's); must divide "
        "into P*v stages",
    )


def split_line(fi: Fraction) -> str:
    """What I and W do to a chunk activation, in words (a negative fraction: I adds)."""
    first = "on a first stage I does nothing and W frees the whole chunk"
    if fi < 0:
        return (
            f"split backward: I frees nothing and adds {-fi} of a chunk (the gradients W needs), "
            f"W frees everything; {first}"
        )
    return f"split backward: I frees {fi} of a chunk, W the rest; {first}"


def parse_fraction(text: str | None) -> Fraction | None:
    if text is None:
        return None
    try:
        f = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        raise error(
            "bad-usage", f"--i-fraction {text}: expected a number such as 0.5 or 1/2"
        ) from None
    if not f <= 1:
        raise error(
            "bad-usage",
            f"--i-fraction {text}: must be at most 1 (I frees at most the whole chunk; "
            "negative: I keeps more than it frees, the gradients W needs)",
        )
    if f < -(10**18):  # its tables and JSON give it as a float too: -1e400 overflowed one
        raise error(
            "bad-usage",
            f"--i-fraction {text}: must be at least -1e18 (I keeps at most 1e18 chunks more "
            "than it frees; under full recomputation it is about -20)",
        )
    return f


def run(args) -> int:
    model = parse_model_spec(args.model) if args.model is not None else None
    if model is not None:  # the same cost model as 'ppir compile --model': it plans the lowering
        spec = args.model.rstrip().rstrip(",")  # a trailing comma is fine in a spec
        args.cost_model = spec + (f",layers={args.layers}" if args.layers else "")
        if args.recompute != "none":
            args.cost_recompute = args.recompute
    c = compile_from_args(
        args, unverified="ppir analyze --no-verify still reports its memory and messages"
    )
    if c.report is not None and not print_report(c.report):
        return EXIT_INVALID
    if model is not None:  # as compiled: at --dp (one data-parallel size), --layers applied
        model = c.config.model
    s = c.program
    # the same analysis as ppir.analyze: whole memory from the model, else from the sizes
    # 'ppir profile' measured when the cost file holds them
    mem, p2p, fp = analyze_compiled(
        c,
        model,
        recompute=args.recompute,
        layers=args.layers,
        i_fraction=parse_fraction(args.i_fraction),
    )
    if args.format == "json":
        doc = to_json(s, mem, p2p)
        if fp is not None:
            doc["model"] = model_json(fp.model) if model is not None else None
            doc["footprint"] = footprint_json(fp)
            for row, r in zip(doc["per_rank"], fp.per_rank):
                row["memory"] = r.to_json()
        emit_json(doc)
    else:
        text = format_text(s, mem, p2p, curve=args.curve)
        if fp is not None:
            text += "\n".join(footprint_lines(fp)) + "\n"
        print(text, end="")
    return 0


def num(x: Fraction | int | None):
    """A JSON number: int when integral, else float."""
    if x is None:
        return None
    x = Fraction(x)
    return int(x) if x.denominator == 1 else float(x)


def to_json(s, mem, p2p) -> dict:
    """The ``ppir.analysis/2`` object."""
    m = mem.model
    rows = []
    for rm, rp in zip(mem.per_rank, p2p.per_rank):
        rows.append(
            {
                "rank": rm.rank,
                "chunks": rm.chunks,
                "peak_activations": num(rm.peak_activations),
                "peak_activations_exact": str(rm.peak_activations),
                "peak_chunks": num(rm.peak_chunks),
                "peak_chunks_exact": str(rm.peak_chunks),
                "param_shares": num(rm.param_shares),
                "peak_op": str(rm.peak_op) if rm.peak_op else None,
                "peak_index": rm.peak_index,
                "peak_bytes": num(round(rm.peak_bytes)) if rm.peak_bytes is not None else None,
                "recv_buffers": {
                    "forward": rm.peak_recv_forward,
                    "backward": rm.peak_recv_backward,
                    "peak": rm.peak_recv,
                    "bytes": num(rm.peak_recv_bytes),
                },
                "sends_forward": rp.sends_forward,
                "sends_backward": rp.sends_backward,
                "recvs_forward": rp.recvs_forward,
                "recvs_backward": rp.recvs_backward,
                "bytes_sent": num(rp.bytes_sent),
                "curve_chunks": [num(c * rm.unit) for c in rm.curve],
            }
        )
    M = p2p.microbatches
    return {
        "format": ANALYSIS_FORMAT,
        "schedule": s.name,
        "params": dict(s.params),
        "ranks": s.ranks,
        "stages": s.stages,
        **microbatch_json(s.microbatches, s.pipelines),
        "placement": list(s.placement),
        "chunk_activation": num(mem.chunk_size),
        "memory": {
            "i_fraction": num(mem.i_fraction),
            "i_fraction_exact": str(mem.i_fraction),
            "recompute": mem.recompute,
            "layers": mem.layers,
            "layers_per_stage": mem.layers_per_stage,
            "chunk_bytes": num(mem.chunk_bytes),
        },
        "model": None
        if m is None
        else {
            "name": m.name,
            "layers": m.layers,
            "hidden": m.hidden,
            "heads": m.heads,
            "seq": m.seq,
            "mbs": m.mbs,
            "dtype": m.dtype,
            "tp": m.tp,
            "ffn": m.ffn_hidden,
        },
        "worst_rank": mem.worst.rank,
        "per_rank": rows,
        "p2p": {
            "forward_per_microbatch": num(p2p.forward_per_microbatch),
            "backward_per_microbatch": num(p2p.backward_per_microbatch),
            "forward_messages": p2p.forward_messages,
            "backward_messages": p2p.backward_messages,
            "local_forward_per_microbatch": num(Fraction(p2p.local_forward, M)),
            "local_backward_per_microbatch": num(Fraction(p2p.local_backward, M)),
            "message_bytes": num(p2p.message_bytes),
            "bytes_per_step": num(p2p.bytes_per_step),
        },
    }


def fmt(x: Fraction | int | None) -> str:
    if x is None:
        return "-"
    return f"{float(x):.3f}".rstrip("0").rstrip(".")


def gib(x: Fraction | None) -> str:
    return "-" if x is None else f"{float(x) / 2**30:.2f}"


def sparkline(curve: tuple[int, ...], top: int, width: int = 64) -> str:
    """The curve as block characters, at most ``width`` wide (the max of each bucket)."""
    if not curve or top <= 0:
        return ""
    n = len(curve)
    out = []
    for i in range(min(width, n)):
        lo, hi = i * n // min(width, n), (i + 1) * n // min(width, n)
        v = max(curve[lo:hi])
        out.append(_BARS[round(v * (len(_BARS) - 1) / top)])
    return "".join(out)


def format_text(s, mem, p2p, curve: bool = False) -> str:
    lines = [
        schedule_line(s.name, s.params, s.ranks, s.stages, s.microbatches, s.pipelines),
        f"A = one microbatch's activations of one rank share (L/P layers); "
        f"one chunk activation = {mem.chunk_size} A",
    ]
    if s.pipelines > 1:
        shares = max(m.param_shares for m in mem.per_rank)
        lines.append(
            f"{s.pipelines} pipelines of {s.stages // s.pipelines} stages (replicas of one model): "
            f"each rank holds {shares}x the parameters of a rank share"
        )
    if s.uses_split_backward():
        lines.append(split_line(mem.i_fraction))
    if mem.model is not None:
        lines.append(
            f"model {mem.model.name}: {mem.layers} layers, {mem.layers_per_stage} per "
            f"stage, recompute {mem.recompute}; one chunk activation = "
            f"{gib(mem.chunk_bytes)} GiB, one message = {gib(p2p.message_bytes)} GiB"
        )
    elif mem.layers is not None:
        lines.append(f"{mem.layers} layers: {mem.layers_per_stage} per stage (chunk)")
    head = ["rank", "chunks", "peak A", "peak chunks", "at op", "recv bufs F/B", "sends F/B"]
    if mem.model is not None:
        head += ["layer act GiB", "recv GiB"]  # the layers alone: whole memory adds the rest
    rows = [head]
    worst = mem.worst.rank
    for rm, rp in zip(mem.per_rank, p2p.per_rank):
        row = [
            f"{rm.rank}{'*' if rm.rank == worst else ''}",
            str(rm.chunks),
            fmt(rm.peak_activations),
            fmt(rm.peak_chunks),
            f"{rm.peak_op} (#{rm.peak_index})" if rm.peak_op is not None else "-",
            f"{rm.peak_recv_forward}/{rm.peak_recv_backward}",
            f"{rp.sends_forward}/{rp.sends_backward}",
        ]
        if mem.model is not None:
            row += [gib(rm.peak_bytes), gib(rm.peak_recv_bytes)]
        rows.append(row)
    lines.append(table(rows, align=">"))
    lines.append(
        f"* worst rank.  p2p per microbatch: forward {fmt(p2p.forward_per_microbatch)}, "
        f"backward {fmt(p2p.backward_per_microbatch)} messages; same-rank hand-offs "
        f"(local): forward {fmt(Fraction(p2p.local_forward, p2p.microbatches))}, "
        f"backward {fmt(Fraction(p2p.local_backward, p2p.microbatches))}"
    )
    if p2p.bytes_per_step is not None:
        lines.append(
            f"p2p bytes per step: {gib(p2p.bytes_per_step)} GiB in "
            f"{p2p.forward_messages + p2p.backward_messages} messages"
        )
    if curve:
        top = max((max(rm.curve, default=0) for rm in mem.per_rank), default=0)
        lines.append("memory curve over each rank's compute ops (height = chunks in flight):")
        curves = [["  rank", rm.rank, f"|{sparkline(rm.curve, top)}|"] for rm in mem.per_rank]
        lines.append(table(curves, align="<><", gap=" "))
    return "\n".join(lines) + "\n"
