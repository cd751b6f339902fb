"""ppir sweep: one parameter swept, measured figures beside the closed forms people quote."""

from __future__ import annotations

import sys
from collections.abc import Callable
from fractions import Fraction

from ppir.analysis import timeline
from ppir.analysis.config import default_op_costs
from ppir.analysis.costs import costs_for
from ppir.analysis.layout import check_layers
from ppir.analysis.memory import analyze_memory, analyze_p2p, split_fractions
from ppir.analysis.model_spec import parse_model_spec
from ppir.cli.analyze import add_model_arguments, fmt, num
from ppir.cli.arg_actions import Once
from ppir.cli.closed_forms import closed_forms
from ppir.cli.common import (
    PLACEMENT_HELP,
    SCHEDULE_HELP,
    add_defines,
    emit_json,
    parse_defines,
    parse_placement,
)
from ppir.cli.output import add_quiet_argument, progress, table
from ppir.cli.sweep_over import parse_over
from ppir.diagnostics import EXIT_INVALID, PpirError, error
from ppir.frontend.loader import bound_params, check_params, load_schedule
from ppir.ir import Schedule
from ppir.ir.graph import build_graph
from ppir.pipeline import compile

NAME = "sweep"
HELP = "sweep one parameter; bubble, step time, P2P and memory beside published formulas"
DESCRIPTION = """For each value of one parameter, expand and lower the schedule and measure from
its IR: the bubble under uniform costs (F=1, B=2, I=W=1 per rank share, a chunk costs P/S of that;
no communication cost), point-to-point messages per microbatch, the worst rank's peak activations
(A = one microbatch's activations of L/P layers), layers per chunk, and the step time (in
forwards of a rank share) that 'ppir compile' prints under the same costs.  Beside each figure:
the closed forms from the literature and from popular explanations, and whether they agree.

Two bubble ratios: bubble/ideal (Narayanan 2021, (P-1)/M for 1F1B) and bubble/total.  A value
the schedule refuses (its require lines, a program that does not verify) gets an error row
naming where; the others are still measured, and the exit status is then 1.

examples:
  ppir sweep interleaved_1f1b --over v=1,2,4,8 -D P=4 -D M=8
  ppir sweep 1f1b --over M=4,8,16 -D P=4 --format json
  ppir sweep 1f1b --over M=4..12 -D P=4        # M = 4, 5, ..., 12
  ppir sweep interleaved_1f1b --over v=1,2,3,4 -D P=8 -D M=16 --layers 96
"""


def add_arguments(p):
    p.add_argument("schedule", metavar="SCHEDULE", help=SCHEDULE_HELP)
    p.add_argument(
        "--over",
        action=Once,
        twice="sweep sweeps one parameter; 'ppir fuzz' takes several (--over P=2..8 --over M=4,8)",
        required=True,
        metavar="NAME=V1,V2,...|NAME=LO..HI",
        help="the one parameter to sweep and its values, a list (--over v=1,2,4,8) or every "
        "integer of a range, inclusive at both ends (--over M=4..12: 4,5,...,12; integer "
        "ends); at most 1,000 values (once: 'ppir fuzz' takes several)",
    )
    add_defines(p, "fix a schedule parameter, e.g. -D P=4 (repeatable)")
    p.add_argument("--placement", metavar="R0,R1,...", help=PLACEMENT_HELP)
    p.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="text (default): a table; json: ppir.sweep/1",
    )
    add_model_arguments(
        p,
        model_help="model shape, as for 'ppir analyze --model'; here it sets the layers of "
        "layers/chunk (unless --layers) and how much of an activation I frees where the "
        "backward is split into I and W (peak A); no bytes: see 'ppir analyze --model'",
        recompute_help="activation recomputation (default none); here it changes only how "
        "much of an activation I frees where the backward is split into I and W (peak A)",
        layers_help="the model's transformer layers, a count (default: the model's), for "
        "layers/chunk",
    )
    add_quiet_argument(p)


def dependency_timing(s: Schedule) -> tuple[Fraction, list[Fraction]]:
    """(step time, busy time per rank) of the compute order alone under the textbook costs (F=1,
    B=2, I=W=1 per rank share, a chunk costs P/S of that; no communication cost): the timeline
    of the compute-only graph, exact.  A ppir error (exit 1) for an order that cannot run."""
    g = build_graph(s.compute_only())
    costs = costs_for(s)
    tl = timeline.run(g, costs)
    if not tl.complete:
        raise error(
            "order-cycle",
            f"{s.name}: the compute order has a cycle (see 'ppir check')",
            exit_code=EXIT_INVALID,
        )
    tick = costs.tick
    busy = [sum(tl.duration[v] for v in order) * tick for order in g.rank_nodes]
    return tl.makespan * tick, busy


def measure(s: Schedule, model=None, recompute="none", layers=None) -> dict:
    """The measured figures of one expanded schedule (exact Fractions)."""
    c = compile(s)
    if not c.ok:
        raise PpirError(c.report.errors, EXIT_INVALID)
    T, busy = dependency_timing(s)
    r = max(range(s.ranks), key=lambda i: T - busy[i])
    # peak A needs no bytes: keep the model's split, not its layer count (checked below)
    mem = analyze_memory(c.graph, i_fraction=split_fractions(model, recompute))
    p2p = analyze_p2p(c.graph, model)
    L = layers if layers is not None else (model.layers if model else None)
    worst = max(c.estimate.per_rank, key=lambda x: x.idle)  # the same ratio, estimated
    out = {
        "bubble": T - busy[r],
        "bubble/ideal": (T - busy[r]) / busy[r] if busy[r] else None,
        "bubble/total": (T - busy[r]) / T if T else None,
        "est bubble/ideal": worst.idle / worst.busy if worst.busy else None,
        "step time": c.estimate.step_time,  # the figure 'ppir compile --backend cost' prints
        "p2p fwd/mb": p2p.forward_per_microbatch,
        "p2p bwd/mb": p2p.backward_per_microbatch,
        "peak A": mem.worst.peak_activations,
        "peak rank": mem.worst.rank,
        "layers/chunk": None,
        "layers error": None,
    }
    if L is not None:
        try:
            out["layers/chunk"] = Fraction(check_layers(L, s.stages, s.ranks))
        except PpirError as e:
            out["layers error"] = e.diagnostics[0].message
    return out


# Errors that no value of the swept parameter can fix: reported once, exit 2.
_UNUSABLE = frozenset(
    {
        "unknown-parameter",
        "bad-input",
        "syntax-error",
        "bad-define",
        "missing-parameter",
        "unknown-model",
        "bad-model",
        "bad-usage",  # --placement with a .pps file
    }
)


def sweep(
    spec: str,
    over: str,
    values: list[int],
    fixed: dict[str, int],
    model=None,
    recompute="none",
    layers=None,
    placement=None,
    step: Callable[[int, str], None] | None = None,
) -> list[dict]:
    """One row per value: params, measured figures, and the closed forms with agreement.
    ``step(done, status)``, when given, is called as each value is taken up (``done`` 0,
    ``M=8: measuring``) and as it is done (``done`` 1), e.g. to advance a bar."""
    rows = []
    for val in values:
        if step is not None:
            step(0, f"{over}={val}: measuring")
        rows.append(_row(spec, over, val, fixed, model, recompute, layers, placement))
        if step is not None:
            step(1, f"{over}={val}" + (": error" if "error" in rows[-1] else ""))
    return rows


def _row(spec, over, val, fixed, model, recompute, layers, placement) -> dict:
    params = dict(fixed, **{over: val})
    try:
        s = load_schedule(spec, params, placement=placement)
        meas = measure(s, model, recompute, layers)
    except PpirError as e:
        if e.kind in _UNUSABLE:
            raise  # not about this value: the sweep itself cannot run
        d = e.diagnostics[0] if e.diagnostics else None
        where = str(d.span) if d is not None and d.span is not None else None
        return {
            "value": val,
            "params": _known_params(spec, params),
            "error": e.message,
            "where": where,
        }
    p = dict(s.params)
    P, M = s.ranks, s.microbatches
    v = p.get("v", Fraction(s.stages, s.ranks))
    preds = []
    for q, text, src, fn, applies in closed_forms(s.name):
        ok = applies is None or applies(P, M, v)
        pv = fn(P, M, v)
        preds.append(
            {
                "quantity": q,
                "formula": text,
                "source": src,
                "predicted": pv,
                "applies": ok,
                "agrees": (pv == meas[q]) if ok else None,
            }
        )
    if meas["layers/chunk"] is not None or meas["layers error"]:
        L = layers if layers is not None else model.layers
        pv = Fraction(L) / (P * v)
        ok = meas["layers error"] is None
        preds.append(
            {
                "quantity": "layers/chunk",
                "formula": "L/(P*v)",
                "source": "L layers over P*v chunks",
                "predicted": pv,
                "applies": ok,
                "agrees": pv == meas["layers/chunk"] if ok else None,
            }
        )
    return {"value": val, "name": s.name, "params": p, "measured": meas, "predictions": preds}


def _known_params(spec, params: dict) -> dict:
    """An error row's parameters, defaults included as a good row's are (its schedule's
    ``params``), resolved from the header even where expansion failed; as given when even the
    defaults cannot be resolved."""
    try:
        return bound_params(spec, params)
    except PpirError:
        return params


def run(args) -> int:
    name, values = parse_over(args.over)
    if args.layers is not None:
        check_layers(args.layers, 1, 1)  # as 'ppir analyze': at least 1 (one stage takes any)
    model = parse_model_spec(args.model) if args.model is not None else None
    fixed, placement = parse_defines(args.defines), parse_placement(args.placement)
    check_params(args.schedule, {name: args.over.partition("=")[2]}, "--over")
    if name in fixed:
        raise error(
            "bad-usage",
            f"--over {name}=... and -D {name}={fixed[name]} both set '{name}'",
            hints=[f"drop -D {name}: the sweep gives '{name}' each of its values"],
        )
    with progress(len(values), f"sweep {name}", quiet=args.quiet, unit="values") as bar:
        rows = sweep(
            args.schedule,
            name,
            values,
            fixed,
            model,
            args.recompute,
            args.layers,
            placement,
            step=bar.update,
        )
    if args.format == "json":
        emit_json(
            {
                "format": "ppir.sweep/1",
                "schedule": args.schedule,
                "over": name,
                "costs": {k: int(c) for k, c in default_op_costs().items()},
                "rows": _json_rows(rows),
            }
        )
    else:
        print(format_text(args.schedule, name, rows), end="")
    failed = [str(r["value"]) for r in rows if "error" in r]
    if failed:  # the figures of the others are printed; the sweep as a whole did not hold
        print(
            f"ppir sweep: {len(failed)} of {len(rows)} values failed ({name}={','.join(failed)})",
            file=sys.stderr,
        )
        return EXIT_INVALID
    return 0


def _json_rows(rows: list[dict]) -> list[dict]:
    out = []
    for row in rows:
        if "error" in row:
            out.append(row)
            continue
        m = {k: (num(x) if not isinstance(x, str) else x) for k, x in row["measured"].items()}
        preds = [dict(p, predicted=num(p["predicted"])) for p in row["predictions"]]
        out.append(
            {"value": row["value"], "params": row["params"], "measured": m, "predictions": preds}
        )
    return out


_COLS = [
    "bubble/ideal",
    "bubble/total",
    "est bubble/ideal",
    "step time",
    "p2p fwd/mb",
    "p2p bwd/mb",
    "peak A",
    "layers/chunk",
]


def _fixed(over: str, rows: list[dict]) -> str:
    """``(P=4, v=2)``: the parameters every row has with the same value (given with -D or the
    header's defaults), which the table's rows do not show; empty when there are none."""
    params = [row["params"] for row in rows]
    same = {k: x for k, x in params[0].items() if k != over and all(p.get(k) == x for p in params)}
    return "(" + ", ".join(f"{k}={x}" for k, x in same.items()) + ")" if same else ""


def format_text(spec: str, over: str, rows: list[dict]) -> str:
    """The table, titled with the schedule's name as 'ppir compile' says it (``my_schedule``
    for ``examples/my_schedule.pps``; the spec itself when no value expanded)."""
    title = next((row["name"] for row in rows if "name" in row), spec)
    lines = [
        f"{title}{_fixed(over, rows)}: sweeping {over}; uniform costs F=1 B=2 I=W=1 per rank "
        "share, no comm cost; A = one microbatch's activations of L/P layers; peak A on the "
        "worst rank",
        "bubble/*: compute graph (ASAP, program order + data deps); step time: the cost "
        "estimator's, as 'ppir compile' prints it; est bubble/ideal: the cost estimator running "
        "the lowered program; each of the rank that idles most ('ppir compile' gives the mean "
        "over ranks)",
        "",
    ]
    cells = [[over] + _COLS]
    for row in rows:
        if "error" in row:  # a short row: the message spans the figures' columns
            at = f" (at {row['where']})" if row.get("where") else ""
            cells.append([row["value"], "error: " + row["error"].splitlines()[0] + at])
            continue
        m = row["measured"]
        figures = [fmt(m[c]) for c in _COLS]
        if m["layers error"]:
            figures[-1] = "not divisible"
        cells.append([row["value"], *figures])
    lines.append(table(cells, align=">"))
    forms = [
        (p["quantity"], p["formula"], p["source"])
        for row in rows
        for p in row.get("predictions", [])
    ]
    if not forms:
        ran = any("error" not in row for row in rows)
        why = "no closed forms on record for this schedule" if ran else "no value ran"
        return "\n".join(lines) + f"\n\n({why})\n"
    lines += ["", "closed forms (measured vs predicted; 'DIFFERS' flags disagreement):"]
    keys = list(dict.fromkeys(forms))
    heads = table([[q, text, f"[{src}]"] for q, text, src in keys]).splitlines()
    for key, head in zip(keys, heads):
        lines.append(f"  {head}")
        for row in rows:
            for p in row.get("predictions", []):
                if (p["quantity"], p["formula"], p["source"]) != key:
                    continue
                mv = row["measured"][key[0]]
                mark = "n/a" if not p["applies"] else "ok" if p["agrees"] else "DIFFERS"
                lines.append(
                    f"      {over}={row['value']}: {fmt(mv)} vs {fmt(p['predicted'])} {mark}"
                )
    return "\n".join(lines) + "\n"
