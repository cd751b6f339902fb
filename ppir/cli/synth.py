"""ppir synth: build a schedule for a per-rank memory cap by priority-driven list scheduling."""

from __future__ import annotations

import json
import sys
from fractions import Fraction

from ppir.analysis.config import default_op_costs
from ppir.cli.arg_actions import Joined
from ppir.cli.argtypes import activation_count, positive_int
from ppir.cli.common import (
    add_defines,
    add_output_argument,
    check_schedule_name,
    emit_json,
    parse_defines,
    refuse_pps_output_as,
)
from ppir.cli.output import add_quiet_argument, progress
from ppir.diagnostics import EXIT_OK, count, error, write_output
from ppir.frontend.limits import DEFAULT_MAX_OPS, check_work

NAME = "synth"
HELP = "synthesise a schedule for a memory cap (zero-bubble list scheduling), emit .pps"
DESCRIPTION = """Build a pipeline schedule for P ranks and M microbatches whose activations stay
within --mem-cap (a whole number of A, one microbatch's activations of a rank's share of the
layers, 4 or 4A; an activation counts until its weight pass), by list scheduling with the
backward split into I and W (Qi et al., ICLR'24), on the contiguous and the V placement, under
several priority rules, beside the built-in zero-bubble orders where they fit (ZB-H1, ZB-H2;
with the V placement also ZB-V, V-Half, V-Min and interleaved ZB at v = 2, 4).  The 1F1B order
at the same cap is always a candidate, so the result is never slower than it, nor than those
built-ins, in the estimator.
The winner is verified and written as literal .pps.

examples:
  ppir synth -D P=4 -D M=8 --mem-cap 4 -o zb_synth.pps
  ppir synth -D P=8 -D M=32 --mem-cap 3 --cost F=1,B=2,I=1,W=1 --no-vshape
  ppir synth -D P=4 -D M=8 --mem-cap 2 --format json     # every candidate's step time

exit status: 0 written, 2 unusable input or usage.
"""


def add_arguments(p):
    add_defines(p, "P (ranks) and M (microbatches), e.g. -D P=4 -D M=8")
    p.add_argument(
        "--mem-cap",
        type=activation_count,
        required=True,
        metavar="A",
        help="per-rank cap on activations: a whole number of A, one microbatch's activations "
        "of a rank's share, e.g. 4 or 4A (no bytes: synth has no model to size an A)",
    )
    p.add_argument(
        "--cost",
        dest="costs",
        default=None,
        action=Joined,
        metavar="K=X,...",
        help="op costs in forwards of a rank share, e.g. F=1,B=2,I=1,W=1 (the defaults; "
        "synth takes F, B, I, W: B times the 1F1B candidate's backward, I and W the split "
        "candidates'; setting one side only is noted on stderr)",
    )
    p.add_argument("--no-vshape", action="store_true", help="contiguous placement only")
    p.add_argument(
        "--name",
        default="zb_synth",
        help="schedule name in the .pps header (letters, digits, '_' and '-')",
    )
    p.add_argument(
        "--max-ops",
        type=positive_int,
        default=DEFAULT_MAX_OPS,
        metavar="N",
        help=f"cap on expanded ops (default {DEFAULT_MAX_OPS:,}): P and M whose list "
        "schedules (2P stages, or P with --no-vshape; F, I and W ops of each stage and "
        "microbatch) exceed it are refused before synthesis; a larger built-in candidate "
        "(interleaved ZB at v=4: 4P stages) is skipped",
    )
    add_output_argument(
        p,
        "write the .pps (or the --format json summary) here (default stdout); a name ppir "
        "reads back as another format is refused (.csv, .txt or .json for the .pps, .pps for "
        "the summary)",
    )
    p.add_argument(
        "--format",
        choices=["pps", "json"],
        default="pps",
        help="pps (default): the schedule; json: the summary and every candidate",
    )
    add_quiet_argument(p)


def parse_costs(text: str | None) -> dict[str, Fraction]:
    """``F=1,B=2`` -> {"F": 1, "B": 2}; a ppir error (exit 2) for anything else."""
    from ppir.cli.cost_options import op_costs

    out: dict[str, Fraction] = {}
    if text is None:
        return out
    for k, v in op_costs(text, dict.fromkeys("FBIW", ""), "bad-usage").items():
        try:
            out[k] = Fraction(v)
        except (ValueError, ZeroDivisionError):
            raise error("bad-usage", f"--cost {text}: '{v}' is not a number") from None
        if out[k] <= 0:
            raise error("bad-usage", f"--cost {text}: {k} must be positive")
    return out


def run(args) -> int:
    from ppir.ir.printer import format_pps
    from ppir.synth.search import synthesize

    d = parse_defines(args.defines)
    unknown = sorted(set(d) - {"P", "M"})
    missing = [f"-D {k}=..." for k in ("P", "M") if k not in d]
    if unknown or missing:
        why = f"missing {' and '.join(missing)}" if missing else f"got {', '.join(unknown)}"
        raise error("bad-usage", f"ppir synth takes -D P=... and -D M=... only ({why})")
    check_schedule_name(args.name)
    _check_output(args.output, args.format)
    if d["P"] >= 1 and d["M"] >= 1:  # (synthesize refuses the others)
        # the size cap every command holds a schedule to, before any candidate is built: the
        # largest candidate has two stages per rank (V-shaped) and a forward, I and W of each
        S = d["P"] * (1 if args.no_vshape else 2)
        what = f"{count(S, 'stage')} x {count(d['M'], 'microbatch')}"
        check_work(3 * S * d["M"], what, args.max_ops, None, "a forward, I and W")
    costs = parse_costs(args.costs)
    _note_backward_costs(costs)
    with progress(None, "synth", quiet=args.quiet, unit="candidates") as bar:
        done = [0]

        def step(n: int, total: int, label: str) -> None:
            if n == 0:
                bar.restart("synth", total)
            bar.update(n - done[0], label)
            done[0] = n

        res = synthesize(
            d["P"],
            d["M"],
            args.mem_cap,
            costs,
            vshape=not args.no_vshape,
            name=args.name,
            progress=step,
            max_ops=args.max_ops,
        )
    if args.format == "json":
        _emit_json(
            args.output,
            {
                "format": "ppir.synth/1",
                "schedule": res.schedule.name,
                "params": dict(res.schedule.params),
                "chosen": res.label,
                "step_time": res.step_time,
                "bubble": res.bubble,
                "peak_activations": _number(res.peak),
                "candidates": [
                    {
                        "label": t.label,
                        "step_time": t.step_time,
                        "peak_activations": None if t.peak is None else _number(t.peak),
                        "note": t.note,
                    }
                    for t in res.trials
                ],
            },
        )
        return EXIT_OK
    at = " ".join(f"{k}={float(v):g}" for k, v in res.costs.items())
    comment = (
        f"synthesised by 'ppir synth': {res.label}; step time {res.step_time:g}, worst-"
        f"rank bubble {res.bubble:g} (estimator at {at}, free comm), peak {res.peak} A "
        f"<= cap {args.mem_cap} A"
    )
    text = format_pps(res.schedule, comment=comment)
    if args.output:
        write_output(args.output, text)
        print(f"wrote {args.output}: {comment}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _note_backward_costs(costs: dict[str, Fraction]) -> None:
    """A note on stderr when --cost sets the whole backward (B, which the 1F1B candidate runs)
    or its halves (I and W, which the split candidates run) but not the other: the defaults
    then time the two kinds of candidate with backwards of different cost."""
    whole, halves = "B" in costs, bool({"I", "W"} & set(costs))
    if whole == halves:
        return
    c = {k: float(costs.get(k, v)) for k, v in default_op_costs().items()}
    given, left = ("B", "I and W") if whole else ("I or W", "B")
    print(
        f"ppir synth: note: --cost sets {given} but not {left}: the 1F1B candidate's backward "
        f"costs B = {c['B']:g}, the split candidates' I + W = {c['I'] + c['W']:g}; give both to "
        "compare like with like",
        file=sys.stderr,
    )


def _check_output(output: str | None, fmt: str) -> None:
    """Refuse an -o name whose suffix says another format than --format writes, before any
    synthesis: a file that ppir would not read back as what it holds."""
    if fmt == "pps":
        hint = "name the output .pps; --format json writes the summary (ppir.synth/1)"
        refuse_pps_output_as(output, "synth", [hint])
    elif (output or "").lower().endswith(".pps"):
        raise error(
            "bad-usage",
            f"-o {output}: --format json writes the summary (ppir.synth/1), and a .pps file is "
            "read back as a schedule",
            hints=["name the summary .json, or drop --format json to write the schedule"],
        )


def _emit_json(output: str | None, obj: dict) -> None:
    """The summary on stdout, or in -o's file with a 'wrote' line (as the .pps is written)."""
    if not output:
        emit_json(obj)
        return
    write_output(output, json.dumps(obj, indent=2) + "\n")
    print(f"wrote {output}: {obj['chosen']}; step time {obj['step_time']:g}")


def _number(x):
    """A count in A as JSON takes it: an int when whole, else a float (as step_time)."""
    return int(x) if x == int(x) else float(x)
