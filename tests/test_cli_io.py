"""CLI I/O failures are one-line errors that name the path (exit 2), never tracebacks:
an output file that cannot be created, a full disk (``/dev/full``) for ``-o`` or for standard
output, and a standard output whose reader has gone (closed pipe)."""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys

import pytest

from ppir.cli import main

FULL = "/dev/full"
needs_dev_full = pytest.mark.skipif(not os.path.exists(FULL), reason="no /dev/full here")


def _one_line(err: str) -> str:
    assert "Traceback" not in err and "Exception ignored" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("backend", ["cost", "cuda"])
@pytest.mark.parametrize(
    "flags", [["-o", "/nonexistent/plan.json"], ["--trace", "/nonexistent/t.json"]]
)
def test_an_output_in_a_missing_directory_is_refused_before_any_work(cli, backend, flags):
    """Refused when the command line is read: the cost backend printed its whole report, then
    failed to write."""
    code, out, err = cli("compile", "1f1b", "--backend", backend, *flags)
    assert code == 2 and not out
    assert (
        _one_line(err) == f"ppir: error: cannot write {flags[-1]}: no such directory /nonexistent"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["viz", "1f1b", "-o"],
        ["compile", "1f1b", "-o"],
        ["compile", "1f1b", "--plot"],
        ["synth", "-D", "P=2", "-D", "M=2", "--mem-cap", "2", "--format", "json", "-o"],
        ["launch", "1f1b", "--module", "m.py", "--plan-out"],
    ],
)
@pytest.mark.parametrize("below", ["out.png", "sub/dir/out.png"])
def test_an_output_below_a_file_names_the_file_in_one_line(cli, tmp_path, argv, below):
    """Was argparse's usage and 'no such directory F' for a folder F that exists, as a file."""
    blocker = tmp_path / "f"
    blocker.write_text("")
    path = f"{blocker}/{below}"
    code, out, err = cli(*argv, path)
    assert code == 2 and not out
    assert (
        _one_line(err) == f"ppir: error: cannot write {path}: {blocker} is a file, not a directory"
    )
    assert list(tmp_path.iterdir()) == [blocker]


@pytest.mark.parametrize(
    "argv",
    [
        ["compile", "1f1b", "-o"],
        ["compile", "1f1b", "--format", "json", "-o"],
        ["compile", "1f1b", "--trace"],
        ["viz", "1f1b", "--format", "html", "-o"],
        ["synth", "-D", "P=2", "-D", "M=2", "--mem-cap", "2", "-o"],
    ],
)
def test_a_dash_for_an_output_is_refused_not_written_as_a_file(cli, tmp_path, monkeypatch, argv):
    """'-o -' wrote a file named '-' and printed nothing (exit 0): a script piping it into a
    JSON reader got no input."""
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(*argv, "-")
    assert code == 2 and not out
    assert _one_line(err) == (
        "ppir: error: cannot write -: '-' is not standard output here; give a file path "
        "(./- for a file named '-')"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "flags",
    [
        ["--backend", "cuda", "-o", "prog.json"],
        ["--backend", "cost", "--format", "json", "-o", "./prog.json"],
        ["--backend", "cost", "--trace", "prog.json"],
    ],
)
def test_an_output_onto_the_schedule_read_is_refused(cli, tmp_path, monkeypatch, flags):
    """'compile prog.json --backend cuda -o prog.json' replaced the program with its plan (exit
    0), which every command then refused as 'not a ppir.program/1 program'."""
    monkeypatch.chdir(tmp_path)
    code, text, _ = cli("dump", "1f1b", "-D", "P=2", "-D", "M=2", "--format", "json")
    (tmp_path / "prog.json").write_text(text)
    code, out, err = cli("compile", "prog.json", *flags)
    assert code == 2 and not out
    assert err.startswith(f"ppir: error: {flags[-2]} {flags[-1]}: that is the SCHEDULE"), err
    assert (tmp_path / "prog.json").read_text() == text


def test_two_outputs_into_one_file_are_refused(cli, tmp_path):
    """'-o r.json --trace r.json' wrote the report and then the trace over it."""
    r = tmp_path / "r.json"
    code, out, err = cli("compile", "1f1b", "--backend", "cost", "-o", str(r), "--trace", str(r))
    assert (code, out) == (2, "") and not r.exists()
    assert err.splitlines() == [
        f"ppir: error: -o {r} and --trace {r} name one file: one would overwrite the other",
        "hint: give each output its own file",
    ]


@pytest.mark.parametrize(
    "backend, writes", [("torch-csv", "torch's CSV"), ("cuda", "its execution plan")]
)
def test_format_json_with_a_backend_of_its_own_format_is_refused(cli, backend, writes):
    """'--backend torch-csv --format json' printed the CSV, exit 0: --format was ignored."""
    code, out, err = cli("compile", "1f1b", "--backend", backend, "--format", "json")
    assert (code, out) == (2, "")
    assert err.startswith(
        f"ppir: error: --format json chooses the cost backend's output; --backend {backend} "
        f"writes {writes}"
    ), err


@needs_dev_full
@pytest.mark.parametrize("backend", ["cost", "cuda"])
def test_a_full_disk_for_an_output_file_is_one_line_with_the_path(cli, backend):
    code, _, err = cli("compile", "1f1b", "--backend", backend, "-o", FULL)
    assert code == 2
    assert _one_line(err) == f"ppir: error: cannot write {FULL}: No space left on device"


class _Full(io.StringIO):
    """A standard output on a full disk."""

    def write(self, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def flush(self):
        pass


@pytest.mark.parametrize(
    "argv",
    [
        ["dump", "1f1b"],
        ["dump", "1f1b", "--format", "json"],
        ["check", "1f1b"],
        ["show", "1f1b"],
        ["list"],
        ["compile", "1f1b"],
    ],
)
def test_a_full_standard_output_is_one_line(argv, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", _Full())
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert _one_line(err) == "ppir: error: cannot write to standard output: No space left on device"


def _ppir(argv, stdout):
    return subprocess.run(
        [sys.executable, "-m", "ppir.cli", *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )


@needs_dev_full
def test_dump_to_dev_full_in_a_real_process():
    with open(FULL, "w") as full:
        r = _ppir(["dump", "1f1b"], full)
    assert r.returncode == 2
    assert _one_line(r.stderr) == (
        "ppir: error: cannot write to standard output: No space left on device"
    )


def test_a_closed_pipe_ends_the_command_quietly():
    """'ppir dump X | head': the reader has what it wanted; like a command killed by SIGPIPE,
    ppir stops with status 141 and says nothing, not even at exit."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before ppir writes anything
    try:
        r = _ppir(["dump", "interleaved_1f1b", "-D", "M=16"], write_end)
    finally:
        os.close(write_end)
    assert r.returncode == 141
    assert r.stderr == ""


def test_a_reader_that_leaves_midway_through_a_large_text_dump_gives_141():
    """The reader goes after the first bytes of a text dump that is written in one print: one
    large write took the partial write and lost the error of the rest (exit 0)."""
    dump = subprocess.Popen(
        [sys.executable, "-m", "ppir.cli", "dump", "1f1b", "-D", "P=32", "-D", "M=512"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    dump.stdout.read(100)  # then leave, as 'head -c 100' does
    dump.stdout.close()
    _, err = dump.communicate(timeout=120)
    assert dump.returncode == 141 and err == b""


def test_standard_output_is_restored_after_a_command(cli):
    before = sys.stdout
    code, out, _ = cli("list")
    assert code == 0 and "1f1b" in out and sys.stdout is before


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["compile", "1f1b", "--backend", "cost", "--plot", ""], "--plot"),
        (["compile", "1f1b", "--backend", "cost", "--trace", ""], "--trace"),
        (["compile", "1f1b", "-o", " "], "-o/--output"),
        (["viz", "1f1b", "-o", ""], "-o/--output"),  # wrote 1f1b.html
        (["import", "x.csv", "-o", ""], "-o/--output"),
        (["synth", "-D", "P=2", "-D", "M=2", "-o", ""], "-o/--output"),
        (["launch", "1f1b", "--module", "m.py", "--plan-out", ""], "--plan-out"),
    ],
)
def test_an_empty_output_path_is_refused_before_anything_runs(
    capsys, tmp_path, monkeypatch, argv, flag
):
    from ppir.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:  # argparse's usage error, before anything runs
        main(argv)
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == "" and list(tmp_path.iterdir()) == [], err
    assert f"error: argument {flag}: needs a file path, got an empty one" in err


@pytest.mark.parametrize(
    "flags, said",
    [
        (["--backend", "cuda", "--plot", "p.png"], "--plot is an option of the cost backend"),
        (["--backend", "cuda", "--trace", "t.json"], "--trace is an option of the cost backend"),
        (["--csv-format", "compute_comms"], "--csv-format is an option of the torch-csv backend"),
        (["--backend", "torch-csv", "--plan-compact"], "--plan-compact is an option of the cuda"),
    ],
)
def test_an_option_of_another_backend_is_refused_not_ignored(cli, tmp_path, flags, said):
    code, out, err = cli("compile", "1f1b", *flags, "-o", str(tmp_path / "out"))
    assert code == 2 and said in err and not out
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_chart_type_matplotlib_cannot_write_is_refused_before_any_work(cli, capsys):
    with pytest.raises(SystemExit):
        cli("compile", "1f1b", "--plot", "chart.txt")
    out, err = capsys.readouterr()
    assert not out and "chart.txt: unsupported chart type (use one of .png, .svg, .pdf)" in err


DEADLOCK = """schedule dl()
ranks 2
stages 2
microbatches 2
rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1
rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1
"""


def test_no_verify_warns_once_and_says_what_can_still_be_made(cli, tmp_path):
    src = tmp_path / "dl.pps"
    src.write_text(DEADLOCK)
    code, _, err = cli("viz", str(src), "--no-verify", "-o", str(tmp_path / "x.html"))
    assert code == 1 and not (tmp_path / "x.html").exists()
    warning, *rest = err.splitlines()
    assert "nothing timed (step time, charts) can be made of it" in warning
    assert warning.endswith(
        "; ppir viz draws its timeline, so it stops here (ppir dump --no-verify still prints "
        "its programs)"
    )
    assert "goes on" not in err and rest[0].startswith("ppir: error: dl cannot finish")
    assert rest[0].endswith(": ranks 0 and 1 wait forever")  # not a Python list, [0, 1]
    code, out, err = cli("dump", str(src), "--no-verify")
    assert code == 0 and "rank 0: 0F0" in out
    assert err.splitlines()[0].endswith("; ppir dump --no-verify still prints its programs")


_DUMP_STILL = "(ppir dump --no-verify still prints its programs)"


@pytest.mark.parametrize(
    "argv, code, still",
    [
        (["analyze"], 0, "ppir analyze --no-verify still reports its memory and messages"),
        (["compile", "--backend", "cuda"], 0, "ppir compile --no-verify still writes its "
         "execution plan"),
        (["compile", "--backend", "torch-csv"], 0, "ppir compile --no-verify still writes its CSV"),
        (["compile", "--backend", "cost"], 1, f"the cost backend times it, so it stops here "
         f"{_DUMP_STILL}"),
    ],
)  # fmt: skip
def test_the_no_verify_warning_says_what_each_command_still_does(cli, tmp_path, argv, code, still):
    src = tmp_path / "dl.pps"
    src.write_text(DEADLOCK)
    out_file = ["-o", str(tmp_path / "out")] if argv[-1] in ("cuda", "torch-csv") else []
    got, _, err = cli(argv[0], str(src), *argv[1:], "--no-verify", *out_file)
    warning = err.splitlines()[0]
    assert got == code and warning.startswith("ppir: warning: dl cannot run to its end")
    assert warning.endswith(f"can be made of it; {still}") and "plans" not in warning


def test_lowering_options_on_a_lowered_program_are_said_to_be_ignored(cli, tmp_path):
    src = tmp_path / "dl.pps"
    src.write_text(DEADLOCK)
    code, _, err = cli("check", str(src), "--lowering", "lockstep", "--no-overlap")
    assert code == 1 and "deadlock" in err
    assert err.startswith(
        "ppir: warning: --lowering and --no-overlap ignored: dl already has its communication"
    )
    code, _, err = cli("check", str(src))
    assert code == 1 and "ignored" not in err


@pytest.mark.parametrize(
    "flags,instead",
    [
        (["--lowering", "naive"], "--lowering naive is -p 'lower-comms{strategy=naive}'"),
        (["--no-overlap"], "--no-overlap is -p 'lower-comms'"),
        (["--overlap"], "--overlap is -p 'lower-comms,overlap-comms'"),
        (["--lowering", "auto"], "--lowering auto compiles -p 'lower-comms,overlap-comms' and"),
    ],
)
def test_lowering_options_with_a_pass_pipeline_are_refused(cli, flags, instead):
    """was: 'ppir check 1f1b -p lower-comms --lowering naive' verified the -p pipeline, the
    --lowering silently dropped."""
    code, out, err = cli("check", "1f1b", "-D", "P=2", "-D", "M=4", "-p", "lower-comms", *flags)
    assert code == 2 and out == "" and "Traceback" not in err
    error, hint = err.strip().splitlines()
    assert error == (
        f"ppir: error: {' '.join(flags)} with -p: the pass pipeline spells out how to lower "
        "and overlap, so give one or the other"
    )
    assert hint.startswith(f"hint: {instead}") and "lower-comms{strategy=...}" in hint
    code, _, err = cli("check", "1f1b", "-D", "P=2", "-D", "M=4", "-p", "lower-comms")
    assert code == 0 and err == ""


@pytest.mark.parametrize("below", ["missing/plan.json", "."])
def test_a_dump_plan_path_rank_0_cannot_write_is_refused_before_any_rank_starts(
    cli, tmp_path, below
):
    """``ppir launch --dump-plan`` into a missing folder started the ranks, trained step 0 and
    only then failed on rank 0 with a traceback through ppir's own files."""
    pytest.importorskip("torch")
    module = tmp_path / "m.py"  # its functions are never called: nothing starts
    module.write_text(
        "def build_stage(s, n): pass\ndef make_batch(i): pass\ndef loss_fn(y, t): pass\n"
    )
    path = str(tmp_path / below)
    code, out, err = cli("launch", "-n", "2", "1f1b", "--module", str(module), "--dump-plan", path)
    assert code == 2 and not out
    why = f"no such directory {tmp_path / 'missing'}" if below != "." else "it is a directory"
    assert _one_line(err).startswith(f"ppir: error: cannot write {path}: {why}"), err


def test_link_costs_on_a_program_with_its_communication_get_a_note(cli, tmp_path):
    """A dumped program keeps the groups planned for the costs it was dumped with: compiled at
    --comm-latency 0.5 it timed 44 where the compute order lowered for that latency gives 35.5,
    without a word."""
    dumped = tmp_path / "d.json"
    code, out, _ = cli("dump", "interleaved_1f1b", "-D", "P=4", "-D", "M=8", "--format", "json")
    dumped.write_text(out)
    code, out, err = cli("compile", str(dumped), "--backend", "cost", "--comm-latency", "0.5")
    assert code == 0 and err == (
        "ppir: note: interleaved_1f1b already has its communication (SEND/RECV), placed when "
        "it was written, not for these link costs; 'ppir dump --compute-only' gives its "
        "compute order, which compile lowers for them\n"
    )
    code, _, err = cli("compile", str(dumped), "--backend", "cost")  # free links: nothing
    assert code == 0 and err == ""
