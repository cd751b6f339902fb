"""``ppir tune`` with a cost file measured by ``ppir profile``: under the table, the ``ppir
launch`` line that runs a ranked row's program as tune timed it.  Launch plans its lowering
with its cost options as compile does, so the line must carry ``--config``: without it launch
runs another program for most schedules (was: tune gave only the ``ppir compile`` line, and a
user who launched the row without ``--config`` ran a program tune had not timed)."""

from __future__ import annotations

import shlex

from ppir.analysis.measured import MeasuredCosts


def _file(tmp_path) -> str:
    F, B = (1e-3, 1.4e-3, 0.9e-3, 1.6e-3), (2e-3, 2.5e-3, 1.8e-3, 3.1e-3)
    m = MeasuredCosts(
        4, F, B, tuple(b / 2 for b in B), tuple(b / 2 for b in B), 3e-4,
        message_bytes=(64.0,) * 3, post=2e-4,
        info=(("model", "examples/gpt_model.py"), ("microbatches", 4), ("microbatch_size", 8)),
    )  # fmt: skip
    path = tmp_path / "costs.toml"
    path.write_text(m.to_toml())
    return str(path)


def _program(argv: list[str]):
    """The program ``argv`` (a ``ppir launch`` or ``ppir compile`` line) compiles, as text."""
    import ppir
    from ppir.cli.common import compile_from_args
    from ppir.cli.main import build_parser

    args = build_parser().parse_args(argv[1:])
    if argv[1] == "launch" and not any(a.startswith("-D P=") for a in argv):
        args.defines = [*(args.defines or []), f"P={args.nproc}"]
    return ppir.to_pps(compile_from_args(args).program)


def test_the_launch_line_runs_the_rows_program(cli, tmp_path):
    path = _file(tmp_path)
    argv = ["tune", "-P", "2", "--config", path, "-q", "--schedules", "zbv,1f1b,dualpipe"]
    code, out, err = cli(*argv, "--top", "3")
    assert code == 0, err
    lines = out.splitlines()
    (line,) = [x for x in lines if x.startswith("ppir launch runs #")]
    assert "make_batch's batch: the 64 samples of the global batch" in line
    rank = int(line.split("#")[1].split(" ")[0])
    row = lines[1 + rank].split()  # the header, then the rows
    assert row[0] == str(rank) and not row[3].endswith("*")  # a row launch can run
    launch = shlex.split(line.split("): ", 1)[1])
    assert launch[:4] == ["ppir", "launch", "-n", "2"] and launch[4] == row[3]
    assert launch[launch.index("--module") + 1] == "examples/gpt_model.py"
    assert launch[launch.index("--config") + 1] == path
    compile_argv = ["ppir", "compile", *launch[4 : launch.index("--module")]]
    compile_argv += ["--backend", "cost", "--config", path]
    assert _program(launch) == _program(compile_argv)
    bare = launch[: launch.index("--config")]  # without the cost file: another lowering
    assert _program(bare) != _program(launch)


def test_no_launch_line_without_a_measured_file(cli):
    code, out, err = cli("tune", "-P", "2", "-q", "--top", "2")
    assert code == 0 and "ppir launch runs" not in out, err
