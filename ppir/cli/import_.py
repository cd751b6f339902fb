"""ppir import: read a torch.distributed.pipelining schedule and print it as literal .pps.

The module is ``import_`` because ``import`` is a Python keyword; the CLI maps the name.
"""

from __future__ import annotations

import dataclasses
import sys

from ppir.cli.common import (
    add_defines,
    add_output_argument,
    check_schedule_name,
    compile_clock,
    parse_defines,
    parse_placement,
    refuse_pps_output_as,
)
from ppir.cli.output import add_quiet_argument
from ppir.diagnostics import EXIT_INVALID, count, error, write_output
from ppir.frontend.keywords import check_known
from ppir.frontend.loader import load_schedule, read_text
from ppir.frontend.parser import is_schedule_name, to_schedule_name
from ppir.frontend.torch_import import known_issue
from ppir.ir.printer import format_pps
from ppir.ir.types import Overlap

NAME = "import"
HELP = "import a torch.distributed.pipelining schedule (CSV, action text or built-in) as .pps"
DESCRIPTION = """Read a schedule written for torch.distributed.pipelining and print it as literal
.pps (or write it with -o).  SOURCE is one of:

  torch:NAME   one of torch's built-in classes, built on stand-in stages (needs torch):
               GPipe, 1F1B, Interleaved1F1B, LoopedBFS, InterleavedZeroBubble,
               ZBVZeroBubble, DualPipeV; parameters -D P=.. -D M=.. -D v=..
  FILE.csv     torch's schedule CSV (compute_only or compute_comms): one row per rank
  FILE.txt     torch action text: one rank per line, actions separated by spaces

The placement is torch's (torch:NAME) or inferred from where each stage computes; --placement
overrides it.  torch's UNSHARD/RESHARD/REDUCE_GRAD are dropped; an overlapped cell
(0F7;7B3)OVERLAP_F_B, a forward then a backward, is one overlapped step, as ppir's own
dualpipev writes it (other overlapped cells become their actions in order, with a note).
The imported program is verified as 'ppir check' verifies it: when it is invalid (torch's
1F1B order, for one), the verifier's diagnostics are printed, nothing is written and the exit
status is 1; --no-verify writes it as it is, e.g. to inspect or fix it.
Every ppir command that takes a schedule also accepts torch:NAME directly (ppir check
torch:Interleaved1F1B -D P=4 -D v=2; ppir show torch:NAME prints what import prints) but
fuzz, which expands a schedule over parameter ranges.

examples:
  ppir import torch:Interleaved1F1B -D P=4 -D M=8 -D v=2
  ppir import schedule.csv --placement 0,1,1,0 -o schedule.pps
"""


def add_arguments(p):
    p.add_argument("source", metavar="SOURCE", help="torch:NAME, a .csv or a .txt file")
    add_defines(p, "torch:NAME parameters: P ranks, M microbatches, v stages per rank")
    p.add_argument(
        "--placement",
        metavar="R0,R1,...",
        help="the rank of each stage (default: torch's, or inferred)",
    )
    p.add_argument("--name", help="the schedule name in the .pps header (default: from SOURCE)")
    add_output_argument(p, "write the .pps here instead of stdout")
    p.add_argument(
        "--no-verify",
        action="store_true",
        help="write the program without verifying it (by default an invalid one is reported, "
        "not written)",
    )
    add_quiet_argument(p)


def load_source(source: str, defines: dict[str, int], placement, name: str | None):
    """The imported Schedule (see DESCRIPTION for what SOURCE may be)."""
    if source.lower().endswith(".txt"):  # NAME.TXT too, as the loader reads NAME.CSV
        from ppir.frontend.csvio import read_action_text

        check_known(defines, (), source, "-D", "torch action text")  # as the loader's words
        s = read_action_text(read_text(source), source, placement)  # the loader's reading
    else:
        s = load_schedule(source, defines, placement=placement)
    if name is None and not is_schedule_name(s.name):  # a file stem such as 'my sched'
        name = to_schedule_name(s.name)
    if name is not None:
        s = dataclasses.replace(s, name=check_schedule_name(name))
    return s


def _overlap_note(s) -> str | None:
    """A note when overlapped cells were imported as their sub-actions in order (cells that are
    not a forward then a backward, which ppir's overlapped step holds)."""
    span = next((a.span for r in range(s.ranks) for a in s.actions(r) if a.span), None)
    text = span.source if span else None
    kept = sum(isinstance(it, Overlap) for prog in s.programs for it in prog)
    n = (text.count("OVERLAP_F_B") if text else 0) - kept
    if n <= 0:
        return None
    return (
        f"{count(n, 'overlapped cell')} (a;b)OVERLAP_F_B that {'is' if n == 1 else 'are'} not a "
        "forward then a backward "
        "imported as their actions in order, as torch's runtime runs them without a custom "
        "OVERLAP_F_B function"
    )


def _report_invalid(s, report, source: str) -> None:
    """The verifier's diagnostics of an import that does not verify, and a line saying nothing
    was written, on stderr."""
    from ppir.cli.common import print_report

    print_report(report)
    hints = ["ppir import --no-verify writes it as it is (e.g. to inspect or fix it)"]
    if (issue := known_issue(s)) is not None:
        hints.insert(0, issue)
    err = error("invalid-import", f"{source} does not verify: nothing written", hints=hints)
    print(err.diagnostics[0].render(), file=sys.stderr)


def imported_pps(
    source: str,
    defines: dict[str, int],
    placement=None,
    name=None,
    verify: bool = True,
    *,
    quiet: bool = False,
    command: str = "import",
) -> str | None:
    """The literal .pps that 'ppir import' writes for ``source`` (notes on stderr); None, with
    the verifier's diagnostics on stderr, when ``verify`` and it is invalid.  Reading and
    verifying show a compile's clock (:func:`~ppir.cli.common.compile_clock`, ``command SOURCE:
    00:05, verify``) unless ``quiet``."""
    from ppir.pipeline import compile

    with compile_clock(f"{command} {source}", quiet) as bar:
        bar.update(0, "torch's schedule" if source.startswith("torch:") else "reading")
        s = load_source(source, defines, placement, name)
        if verify:
            report = compile(s).report  # as 'ppir check' verifies it
    if verify and not report.ok:  # said after the bar is cleared
        _report_invalid(s, report, source)
        return None
    note = _overlap_note(s)
    comment = f"imported by ppir from {source}"
    if note:
        comment += f"\n{note}"
        print(f"ppir: note: {note}", file=sys.stderr)
    return format_pps(s, comment=comment)


def run(args) -> int:
    refuse_pps_output_as(
        args.output,
        "import",
        [
            "name the output .pps; torch's CSV is what 'ppir compile SCHEDULE --backend "
            "torch-csv -o FILE.csv' writes"
        ],
    )
    text = imported_pps(
        args.source,
        parse_defines(args.defines),
        parse_placement(args.placement),
        args.name,
        verify=not args.no_verify,
        quiet=args.quiet,
    )
    if text is None:
        return EXIT_INVALID
    if args.output:
        write_output(args.output, text)
        print(f"wrote {args.output}")  # as every command that writes a file says it
    else:
        sys.stdout.write(text)
    return 0
