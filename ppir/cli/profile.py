"""ppir profile: measure a model's stages on this machine and write a cost file."""

from __future__ import annotations

import sys
import warnings

from ppir.analysis.units import fmt_time
from ppir.cli.argtypes import integer, key_values, positive_int, positive_seconds
from ppir.cli.common import add_output_argument
from ppir.cli.output import add_quiet_argument, progress, table
from ppir.diagnostics import PpirError, error, write_output
from ppir.torch.run import add_module_arguments

NAME = "profile"
HELP = "measure a model's per-stage F, B, I, W, messages and activations; write a cost file"
DESCRIPTION = """Build the model module's stages, run a real 1F1B over --ranks processes (gloo on
CPU, NCCL with one GPU per rank; --ranks 1 measures in this process) and time every piece's
forward, backward, backward-input and backward-weight inside that run, all ranks computing at
once as a schedule runs them.  Then, still on all ranks at once: a forward and a backward back to
back (F&B), one boundary message per rank pair (half a ping-pong of the real tensor), and the
bytes autograd saves in one forward (saved-tensor hooks, parameters excluded).  Last, two more
orders over the same ranks, interleaved 1F1B with every piece a stage (looped) and 1F1B with
the rank cuts a piece earlier (shifted), time F, B and I both with their input made on the
rank and received from another: a schedule's stage costs the one its placement gives
(--no-orders skips them; they need --stages at least 2 x --ranks and --microbatches a
multiple of --ranks).

--stages S builds the model in S pieces (a multiple of --ranks; each rank chains S/ranks of
them); the cost file then serves every schedule whose stage count divides S: profile once with
--stages 2P to time both 1F1B (P stages) and interleaved or V schedules (2P stages).

The cost file is TOML with one [measured] table (docs/cost-model.md); pass it with --config to
'ppir compile --backend cost', 'ppir tune' and 'ppir viz'.  Its last line checks it against the
run: the profiled 1F1B steps' median wall time against the estimate of the same program from
the file (the gap is what the estimator misses on this machine, e.g. more ranks than cores).

examples:
  ppir profile --module examples/gpt_model.py --ranks 2 --stages 4 -o gpt.toml
  ppir compile zbv -D P=2 -D M=8 --backend cost --config gpt.toml
  ppir profile --module examples/gpt_model.py --module-opt layers=8 --ranks 4 --stages 8 \\
      --microbatches 8 --steps 10 -o gpt8.toml
"""


def add_arguments(p):
    add_module_arguments(p)
    p.add_argument(
        "--ranks", "-n", type=integer, default=2, metavar="P", help="processes to run (default 2)"
    )
    p.add_argument(
        "--stages",
        type=integer,
        default=None,
        metavar="S",
        help="stages (pieces) to build the model in (default: --ranks)",
    )
    p.add_argument(
        "--microbatches",
        "-M",
        type=integer,
        default=None,
        metavar="M",
        help="microbatches per step; make_batch's batch must split into them (default 2*ranks)",
    )
    p.add_argument(
        "--steps",
        type=positive_int,
        default=18,
        help="timed steps, at least 2 (default 18; each further order, the near and far times "
        "on ranks of two stages or more, gets a third of them: with 6, one step per kind left "
        "those figures up to 2x off between profiles)",
    )
    p.add_argument(
        "--warmup",
        type=integer,
        default=2,
        help="untimed steps first (default 2; with 0 the first step's one-time set-up is timed)",
    )
    p.add_argument("--device", default="auto", help="auto (cuda when present), cpu or cuda")
    p.add_argument(
        "--threads",
        type=integer,
        default=None,
        metavar="N",
        help="torch threads per rank (default: cores / ranks)",
    )
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=120.0,
        metavar="SECONDS",
        help="process-group timeout in seconds (default 120)",
    )
    p.add_argument(
        "--no-orders",
        action="store_true",
        help="skip the looped and shifted orders that time F, B and I with their input made on "
        "the rank and received (less time and memory; the estimator then charges every op as "
        "1F1B ran it)",
    )
    add_output_argument(p, "write the cost file here (else stdout)")
    add_quiet_argument(p)


def parse_options(items: list[str]) -> dict:
    try:
        return key_values(items, "--module-opt")
    except ValueError as e:
        raise error("bad-usage", str(e)) from None


def run(args) -> int:
    try:
        import torch  # noqa: F401
    except ModuleNotFoundError:
        raise error(
            "needs-torch", "ppir profile runs the model: install the torch extra (ppir[torch])"
        ) from None
    from ppir.profile.errors import OptimizerNotMeasured
    from ppir.profile.launch import ProfileError, ProfileFailed, ProfileSpec, profile
    from ppir.profile.orders import why_none
    from ppir.profile.selfcheck import check_line, held_to_run, small_ops_note
    from ppir.profile.summary import busy_warning
    from ppir.torch.run import check_module

    check_module(args.module)
    given = (("--stages", args.stages), ("--microbatches", args.microbatches))
    for flag, value in given + (("--threads", args.threads),):
        if value is not None and value < 1:  # 0 was read as the default, -4 failed in a rank
            raise error("bad-usage", f"{flag} must be positive, got {value}")

    spec = ProfileSpec(
        args.module,
        parse_options(args.module_opt),
        args.ranks,
        args.stages or 0,  # 0: the defaults (ProfileSpec)
        args.microbatches or 0,
        args.steps,
        args.warmup,
        args.device,
        args.threads or 0,
        args.timeout,
        not args.no_orders,
    )
    if args.warmup == 0:
        print(
            "ppir: warning: --warmup 0: the first step's one-time set-up (allocations, lazy "
            "initialisation) is timed; expect high figures",
            file=sys.stderr,
        )
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", OptimizerNotMeasured)
            mc = _measure(spec, profile, args.quiet)
    except ProfileError as e:
        raise error("bad-usage", str(e)) from None
    except ProfileFailed as e:
        print(str(e), file=sys.stderr)
        return 1
    except PpirError:  # ppir's own diagnostics, as every command prints them
        raise
    except Exception as e:  # raised in this process by the model's own code (configure,
        # make_batch, a stage with --ranks 1): its traceback and notes, under a header as a
        # rank's has
        from ppir.tracebacks import user_traceback

        print(f"ppir profile: failed:\n{user_traceback(e)}", end="", file=sys.stderr)
        return 1
    for w in caught:  # the user's make_optimizer failed: the traceback, as ppir's warning
        if issubclass(w.category, OptimizerNotMeasured):
            print(f"ppir: warning: {w.message}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    busy = busy_warning(mc)
    if busy:
        print(f"ppir: warning: {busy}", file=sys.stderr)
    why = why_none(spec.ranks, spec.num_stages, spec.num_microbatches)
    if spec.orders and spec.ranks > 1 and why:
        print(
            f"ppir: note: F, B and I were timed only where 1F1B runs them, not both with their "
            f"input made on the rank and received ({why}); the estimator charges each op "
            "the time 1F1B gave it, wherever a schedule makes its input",
            file=sys.stderr,
        )
    cmd = "ppir profile " + " ".join(sys.argv[2:]) if len(sys.argv) > 2 else "ppir profile"
    text = mc.to_toml(
        f"written by: {cmd}\nseconds per microbatch; pass with --config to 'ppir compile "
        "--backend cost', 'ppir tune', 'ppir viz'"
    )
    held = held_to_run(mc)  # the file without its oversubscription, against the steps
    check = check_line(*held, mc) if held else ""
    if check:  # kept in the file too, as a comment
        text += f"# {check}\n"
    if args.output:
        write_output(args.output, text)
        print(summary(mc), end="")
        print(f"wrote {args.output}")
        if check:
            print(check)
    else:
        sys.stdout.write(text)
    if held and (note := small_ops_note(*held, mc)):
        print(f"ppir: note: {note}", file=sys.stderr)
    return 0


def _measure(spec, profile, quiet: bool):
    """``profile(spec)`` with a bar on a terminal's stderr: the warm-up and timed steps as rank
    0 ends them, the further orders' steps (:mod:`ppir.profile.orders`), then the F&B, message
    and memory measurements that follow."""
    total, main = spec.total_steps, spec.warmup + spec.steps
    where = "in this process" if spec.ranks == 1 else f"on {spec.ranks} ranks"
    with progress(total, "profile", quiet=quiet, unit="steps") as bar:
        bar.update(0, f"starting 1F1B {where}")
        told = 0

        def on_step(n: int) -> None:
            nonlocal told
            status = "warm-up" if n < spec.warmup else "timed steps"
            if n == main:  # F&B, the transfers and the bytes run next, then the orders
                status = "F&B, messages and saved bytes"
                if total > main:
                    status += ", then the looped and shifted orders"
            elif n > main:
                status = "looped and shifted orders" if n < total else "gathering the samples"
            bar.update(n - told, status)
            told = n

        return profile(spec, on_step)


def by_position(mc) -> str:
    """F, B and I per stage by where their input is made, a table in milliseconds ('' when
    not measured): what a schedule's stage costs with its input from its own rank or another
    (:mod:`ppir.analysis.measured_order`)."""
    if not mc.order:
        return ""
    t = dict(mc.order)
    rows = [["stage", *(f"{k} {w} ms" for k in "FBI" for w in ("near", "far"))]]
    for s in range(mc.stages):
        rows.append(
            [str(s), *(f"{t[f'{k}_{w}'][s] * 1e3:.3f}" for k in "FBI" for w in ("near", "far"))]
        )
    return (
        "by where the input is made: near, on the stage's own rank (the stage before's F, the "
        "stage after's B or I); far, received from another rank\n" + table(rows, align=">") + "\n"
    )


def summary(mc) -> str:
    """A per-stage table in milliseconds and KiB (frozen parameters and buffers where a stage
    has any), then the boundary message and the parameters stages share."""
    head = ["stage", "F ms", "B ms", "I ms", "W ms", "W late ms", "F&B ms", "saved KiB"]
    frozen = any(mc.frozen_bytes)
    rows = [[*head, "params KiB", *(["frozen KiB"] if frozen else []), "optimizer KiB"]]
    for s in range(mc.stages):
        rows.append(
            [
                str(s),
                *(f"{getattr(mc, k)[s] * 1e3:.3f}" for k in ("F", "B", "I", "W")),
                f"{mc.W_late[s] * 1e3:.3f}" if mc.W_late else "-",
                f"{mc.FB[s] * 1e3:.3f}" if mc.FB else "-",
                f"{mc.activation_bytes[s] / 1024:.1f}" if mc.activation_bytes else "-",
                f"{mc.param_bytes[s] / 1024:.1f}" if mc.param_bytes else "-",
                *([f"{mc.frozen_bytes[s] / 1024:.1f}"] if frozen else []),
                f"{mc.optimizer_bytes[s] / 1024:.1f}" if mc.optimizer_bytes else "-",
            ]
        )
    if dict(mc.info).get("ranks") == 1:  # nothing was sent: no time to print as 0.000 ms
        comm = (
            f"boundary message: {mc.message_size:.0f} bytes, not timed (one rank sends none; "
            "the cost file prices messages and posts as free: profile with --ranks 2 or more)"
        )
    else:
        comm = (  # scaled as compile's header says them: 4.86 us, not 0.005 or 0.000 ms
            f"boundary message: {fmt_time(mc.transfer, 's')} ({mc.message_size:.0f} bytes); "
            f"posting a group: {fmt_time(mc.post, 's')} of processor time, "
            f"{fmt_time(mc.post_wall, 's')} of wall time"
        )
    return (
        table(rows, align=">")
        + f"\n{comm}\n"
        + by_position(mc)
        + "".join(
            f"shared: stages {', '.join(map(str, e.stages))} hold one "
            f"{(e.param_bytes + e.frozen_bytes) / 1024:.1f} KiB parameter (in each one's "
            "params; counted once where one rank holds several)\n"
            for e in mc.shared
        )
    )
