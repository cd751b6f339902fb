"""Check every torch.distributed.pipelining built-in with ppir, next to torch's own checks.

Usage:  python bench/torch_builtins_check.py [--quick | --wide] > table.md

For each torch class and (P, M, v) of the grid, one table row:

* ``torch ctor``: does the class accept the parameters (its own constraint errors);
* ``torch validate``: ``_validate_schedule`` on the compute-only ``pipeline_order``;
* ``torch sim``: ``_add_send_recv`` then ``_simulate_comms_compute`` (unit steps; "n/a" for
  OVERLAP_F_B, which the simulator does not support);
* ``ppir (own lowering)``: ``ppir check torch:NAME`` -- the compute order imported and lowered
  by ppir, verified under rendezvous semantics;
* ``ppir (torch lowering)``: torch's own ``pipeline_order_with_comms`` (lone SEND/RECV actions,
  UNSHARD/RESHARD/REDUCE_GRAD dropped) verified by ppir with one FIFO per rank, and, when that
  fails, with relaxed (per-channel) progress.

Cells hold ``ok`` or the diagnostic kinds found.  Needs torch; runs in one process.
"""

from __future__ import annotations

import argparse
import copy
import sys

import ppir
from ppir.diagnostics import PpirError
from ppir.frontend.csvio import read_csv_text
from ppir.frontend.torch_import import (
    MULTI,
    NAMES,
    SINGLE,
    load_torch_builtin,
    torch_schedule_object,
)
from ppir.verify import verify


def grid(quick: bool):
    Ps = (2, 4) if quick else (2, 3, 4)
    for name in NAMES:
        vs = (
            (1,)
            if name in SINGLE
            else (2,)
            if name in ("ZBVZeroBubble", "DualPipeV")
            else (1, 2, 3)
        )
        for P in Ps:
            for M in sorted({P // 2 or 1, P, 2 * P, 2 * P + 1}):
                for v in vs:
                    yield name, P, M, v


def _kinds(report) -> str:
    kinds = sorted({d.kind for d in report.errors})
    return "ok" if not kinds else ", ".join(kinds)


def torch_checks(obj, name: str, P: int, v: int) -> tuple[str, str, object]:
    """(validate, sim, lowered order or None) for a constructed torch schedule object."""
    from torch.distributed.pipelining import schedules as sch

    S = P * v if name in MULTI else P
    order = {
        r: [
            a
            for a in obj.pipeline_order[r]
            if a is not None and a.computation_type != sch.REDUCE_GRAD
        ]
        for r in range(P)
    }
    try:
        sch._validate_schedule(order, P, S, obj._n_microbatches)
        validate = "ok"
    except (AssertionError, ValueError, RuntimeError) as e:
        validate = "rejects: " + str(e).splitlines()[0][:70]
    mapping = obj.stage_index_to_group_rank if name in MULTI else {s: s for s in range(S)}
    if any(a.computation_type == sch.OVERLAP_F_B for row in order.values() for a in row):
        sim = "n/a (OVERLAP_F_B)"
    else:
        try:
            lowered = sch._add_send_recv(copy.deepcopy(order), mapping.__getitem__, S)
            sch._simulate_comms_compute(lowered, mapping.__getitem__, S)
            sim = "ok"
        except (AssertionError, ValueError, RuntimeError, KeyError, IndexError) as e:
            sim = "fails: " + str(e).splitlines()[0][:60]
    with_comms = getattr(obj, "pipeline_order_with_comms", None) if name in MULTI else None
    return validate, sim, with_comms


def ppir_on_torch_lowering(with_comms, name, P, M, v) -> str:
    if with_comms is None:
        return "-"
    text = "".join(",".join(str(a) for a in with_comms[r]) + "\n" for r in range(P))
    try:
        s = read_csv_text(text, f"<torch-lowered>/{name}_P{P}_M{M}_v{v}.csv", microbatches=M)
    except PpirError as e:
        return f"import: {e.kind}"
    fifo = _kinds(verify(s))
    if fifo == "ok":
        return "ok"
    return f"{fifo} (relaxed: {_kinds(verify(s, progress='relaxed'))})"


def row(name: str, P: int, M: int, v: int) -> list[str]:
    vtxt = "-" if name in SINGLE else str(v)
    try:
        obj = torch_schedule_object(name, P, M, v)
    except PpirError as e:
        msg = e.diagnostics[0].message.split(": ", 1)[-1][:80]
        return [name, str(P), str(M), vtxt, f"rejects: {msg}", "-", "-", "-", "-"]
    validate, sim, with_comms = torch_checks(obj, name, P, v)
    own = _own_lowering(name, P, M, v)
    theirs = ppir_on_torch_lowering(with_comms, name, P, M, v)
    return [name, str(P), str(M), vtxt, "ok", validate, sim, own, theirs]


def _own_lowering(name: str, P: int, M: int, v: int) -> str:
    """``ok`` or the diagnostic kinds of the class's compute order lowered by ppir."""
    params = {"P": P, "M": M} | ({} if name in SINGLE else {"v": v})
    return _kinds(ppir.compile(load_torch_builtin(name, params)).report)  # as ppir check


def wide() -> int:
    """Per torch class, of the sizes P <= 5, M <= 2P + 2, v <= 3 its constructor accepts,
    how many verify with ppir's own lowering, and the first that does not."""
    print("| torch class | sizes torch accepts | verify (ppir's lowering) | first that fails |")
    print("|---|---|---|---|")
    for name in NAMES:
        accepted, ok, first = 0, 0, "-"
        for P in range(1, 6):
            for M in range(1, 2 * P + 3):
                for v in (1,) if name in SINGLE else (1, 2, 3):
                    try:
                        torch_schedule_object(name, P, M, v)
                    except PpirError:
                        continue
                    accepted += 1
                    kinds = _own_lowering(name, P, M, v)
                    ok += kinds == "ok"
                    if kinds != "ok" and first == "-":
                        first = f"P={P} M={M} v={v}: {kinds}"
        print(f"| {name} | {accepted} | {ok} | {first} |")
        sys.stdout.flush()
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="P in {2, 4} only")
    ap.add_argument(
        "--wide",
        action="store_true",
        help="a summary per class over every size P <= 5, M <= 2P + 2, v <= 3 torch accepts",
    )
    args = ap.parse_args(argv)
    if args.wide:
        return wide()
    head = [
        "torch class",
        "P",
        "M",
        "v",
        "torch ctor",
        "torch validate",
        "torch sim",
        "ppir (own lowering)",
        "ppir (torch lowering)",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, P, M, v in grid(args.quick):
        print("| " + " | ".join(c.replace("|", "/") for c in row(name, P, M, v)) + " |")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
