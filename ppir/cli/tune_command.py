"""The ``ppir compile`` command line of a ``ppir tune`` row: the row's program compiled alone,
as ``ppir compile ... --backend cost`` reports it (the same step time and peak memory).

The cost-model options ``ppir tune`` shares with ``ppir compile`` are recorded as the parser
registers them (:class:`ppir.cli.recording.RecordingGroup`), so that :func:`compile_command`
can pass on the ones a tune run was given (``--config``, ``--cost``, ``--hardware``, links,
...) with their values as written.
The row's own choices come from the candidate: the schedule and ``-D K=V`` for each parameter
it was expanded with, and with a model ``--model`` (the row's shape: its preset and the fields
that differ, ``mbs`` and ``tp`` among them), ``--dp``, ``--recompute`` and ``--stage-layers``.
"""

from __future__ import annotations

import os
import shlex

from ppir.analysis.layout import format_stage_layers
from ppir.analysis.model_spec import spec_text
from ppir.cli.cost_options import add_cost_arguments
from ppir.cli.recording import RecordingGroup
from ppir.schedules import builtin_file


def add_recorded_cost_arguments(p) -> None:
    """Add the cost-model options (a "cost model" group) to ``ppir tune``'s parser ``p``,
    recorded for :func:`compile_command` as ``args.tune_cost_actions``."""
    flags = RecordingGroup(p.add_argument_group("cost model"))
    add_cost_arguments(flags, recompute=False, dp=False)
    p.set_defaults(tune_cost_actions=flags.actions)


_ROW_OWN = {"cost_model"}  # --model: written from the row's shape (its mbs, tp), not as given


def _given_flags(args, actions) -> list[str]:
    """The recorded cost options that ``args`` sets (not at their default), as tokens: the
    option's long name and its value as written (a switch alone)."""
    out: list[str] = []
    for a in actions:
        value = getattr(args, a.dest, None)
        if a.dest in _ROW_OWN or value is None or value == a.default:
            continue
        flag = next((s for s in a.option_strings if s.startswith("--")), a.option_strings[0])
        out += [flag] if a.nargs == 0 else [flag, str(value)]
    return out


def compile_command(c, args, actions) -> str | None:
    """The ``ppir compile`` command that compiles candidate ``c``'s program with the cost
    options of the tune run ``args`` (``actions``: the recorded ones, ``args.tune_cost_actions``
    from :func:`add_recorded_cost_arguments`), shell-quoted; None when its schedule was not
    expanded (no parameters to give).  A built-in searched by default is named by its
    installed file where the working directory holds a file of its name.  Its step time and peak
    memory are the row's; without a model, in the units of one micro-batch (the row's are per
    sample: ``c.mbs`` times them)."""
    if c.program is None:
        return None
    argv = ["ppir", "compile", *_row_schedule(c, args), "--backend", "cost"]
    model = c.config.model if c.config is not None else None
    if model is not None:
        argv += ["--model", spec_text(model, omit=("dp",))]
        argv += ["--dp", str(c.dp)] if c.dp > 1 else []
        argv += ["--recompute", c.recompute]
        if c.stage_layers:
            argv += ["--stage-layers", format_stage_layers(c.stage_layers)]
    argv += _given_flags(args, actions) + _progress(args)
    return shlex.join(argv)


def _row_schedule(c, args) -> list[str]:
    """Candidate ``c``'s schedule and a ``-D K=V`` for each parameter it was expanded with; a
    built-in searched by default is named by its installed file where the working directory
    holds a file of its name (sources.read_source reads that file first; a directory never)."""
    schedule = c.schedule
    if args.schedules is None and os.path.exists(schedule) and not os.path.isdir(schedule):
        schedule = builtin_file(schedule)
    return [schedule, *(t for k, v in c.program.params for t in ("-D", f"{k}={v}"))]


def _progress(args) -> list[str]:
    """``--progress-model`` as the tune run gave it (nothing for the default)."""
    return ["--progress-model", args.progress_model] if args.progress_model != "fifo" else []


def command_line(c, cmd: str, sized: bool) -> str:
    """The line under the table that gives ``cmd``, the first ranked row ``c``'s command
    (``sized``: memory in bytes, else in A, in which case the line says what a micro-batch of
    more than one sample scales)."""
    per = ""
    if c.scale != 1:  # without a model, compile's units are a micro-batch's, tune's a sample's
        what = "step time and peak" + (" activations" if not sized else "")
        per = f" (per micro-batch of {c.mbs} samples: {c.mbs} x its {what} are the row's)"
    return f"ppir compile reports #1's step time and peak memory{per}: {cmd}"


def _launch_dests() -> set[str]:
    """The cost options ``ppir launch`` takes (no model shape on its command line)."""
    import argparse

    p = argparse.ArgumentParser(add_help=False)
    add_cost_arguments(p, model=False)
    return set(vars(p.parse_known_args([])[0]))  # every option's dest, at its default


def launch_command(c, args, actions) -> str | None:
    """With a cost file measured by ``ppir profile`` (``--config``): the ``ppir launch`` line
    that runs candidate ``c``'s program as tune timed it, or None where it cannot (not
    expanded, or a program the runtime cannot run).  It passes the cost options on, since they
    plan the lowering (without ``--config`` launch lowers most schedules otherwise), names the
    profiled module (its options are the user's to repeat: the file does not keep them)."""
    from ppir.plan.build import runtime_limit

    measured = c.config.measured if c.config is not None else None
    if c.program is None or measured is None or runtime_limit(c.program) is not None:
        return None
    schedule, *defines = _row_schedule(c, args)
    argv = ["ppir", "launch", "-n", str(c.pp * c.dp), schedule]
    argv += ["--dp", str(c.dp)] if c.dp > 1 else []
    argv += [*defines, "--module", str(dict(measured.info).get("model", "MODULE"))]
    keep = _launch_dests()
    argv += _given_flags(args, [a for a in actions if a.dest in keep]) + _progress(args)
    return shlex.join(argv)


def launch_line(rank: int, cmd: str, G: int) -> str:
    """The line under the table that gives ``cmd``, row ``rank``'s :func:`launch_command`."""
    return (
        f"ppir launch runs #{rank} as timed (the same cost options plan its lowering; "
        f"make_batch's batch: the {G} samples of the global batch, with the module options it "
        f"was profiled with): {cmd}"
    )
