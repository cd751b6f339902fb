"""Issue 19's front-end reproducers, each a located diagnostic with the right exit status, fast.

Sizes are refused before any work that grows with them (ppir.frontend.limits), integers stay
within 2**63 - 1, nesting is refused where it starts, bad bytes and empty files are located.
Each CLI case runs in-process under a wall-clock guard (``_quick``): a regression that loops
fails instead of stalling the suite.
"""

from __future__ import annotations

import re
import signal
import time
from contextlib import contextmanager

import pytest

from ppir.diagnostics import PpirError
from ppir.frontend.loader import load_schedule, load_text

BODY = "ranks 1\nmicrobatches 1\nprogram r { F(0) B(0) }\n"
LOCATED = re.compile(r"^(?P<path>\S+):(?P<line>\d+):(?P<col>\d+): error: ", re.M)


@contextmanager
def _quick(seconds: float = 10.0):
    """Fail (rather than hang) when the block runs longer than ``seconds``."""

    def stop(signum, frame):
        raise AssertionError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    t0 = time.perf_counter()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert time.perf_counter() - t0 < seconds


def _check(cli, tmp_path, text: str | bytes, *args, name="s.pps"):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    with _quick():
        code, out, err = cli("check", str(path), *args)
    assert "Traceback" not in err
    return code, err, str(path)


def _located(err: str, path: str, line: int, col: int | None = None) -> None:
    m = LOCATED.search(err)
    assert m, f"no file:line:col in\n{err}"
    assert m.group("path") == path and int(m.group("line")) == line, err
    if col is not None:
        assert int(m.group("col")) == col, err
    lines = err.splitlines()
    assert re.match(rf"^{line} \| ", lines[1]) and "^" in lines[2], err


# ------------------------------------------------------------------ sizes
def test_a_literal_with_huge_microbatch_indices_is_refused_at_the_action(cli, tmp_path):
    code, err, p = _check(cli, tmp_path, "ranks 1\nrank 0: 0F99999999999 0B99999999999\n")
    assert code == 2 and "microbatches = 100,000,000,000 exceeds" in err
    _located(err, p, 2, 9)


def test_a_two_op_program_with_a_billion_microbatches_is_refused(cli, tmp_path):
    text = "schedule two(M = 1)\nranks 1\nmicrobatches M\nprogram r { F(0) B(0) }\n"
    code, err, p = _check(cli, tmp_path, text, "-D", "M=1000000000")
    assert code == 2 and "microbatches = 1,000,000,000 exceeds" in err
    _located(err, p, 3, 1)


def test_1f1b_with_a_hundred_million_microbatches_is_refused_before_expanding(cli):
    with _quick():
        code, _, err = cli("check", "1f1b", "-D", "P=2", "-D", "M=100000000")
    assert code == 2
    assert "2 stages x 100,000,000 microbatches need at least 400,000,000 ops" in err
    assert LOCATED.search(err) and "the cap is --max-ops" in err


@pytest.mark.parametrize(
    "text, what",
    [
        ("microbatches 3000000\nrank 0: 0F0 0B0\n", "1 stage x 3,000,000 microbatches"),
        ("stages 3000000\nrank 0: 0F0 0B0\n", "3,000,000 stages need"),
        ("rank 0: 0F0 0B0 2999999F0\n", "3,000,000 stages need"),
        ("rank 5000000: 0F0 0B0\n", "ranks = 5,000,001 exceeds"),
        ("ranks P\nmicrobatches 1\nprogram r { F(0) B(0) }\nlet P = 1\n", "undefined name 'P'"),
        ("schedule s(P = 3000000)\nranks P\nmicrobatches 1\nprogram r { }\n", "3,000,000 ranks"),
    ],
)
def test_sizes_over_the_caps_are_refused_fast(text, what):
    with _quick(), pytest.raises(PpirError, match=re.escape(what)) as e:
        load_text(text, path="s.pps")
    assert e.value.diagnostics[0].span is not None


def test_torch_sizes_are_refused_before_torch_runs():
    pytest.importorskip("torch")
    with _quick(), pytest.raises(PpirError, match="torch:1F1B with 2 stages x 10,000,000"):
        load_schedule("torch:1F1B", {"P": 2, "M": 10_000_000})


def test_large_valid_inputs_still_load():
    """The P=32 M=512 v=4 bench: 131,072 compute ops, far under the caps."""
    s = load_schedule("interleaved_1f1b", {"P": 32, "M": 512, "v": 4})
    assert s.num_compute_ops == 131_072


# ------------------------------------------------------------------ integers
@pytest.mark.parametrize(
    "text, line, col",
    [
        ("let x = " + "7" * 5000 + "\n" + BODY, 1, 9),
        ("rank 0: 0F" + "9" * 5000 + "\n", 1, 11),
        ("rank 0: 0F0 0B0\nrank " + "1" * 30 + ": 1F0\n", 2, 6),
        ("rank 0: (" + "3" * 4301 + "F0;0B0)OVERLAP_F_B\n", 1, 10),
        ("schedule s(P = -" + "1" * 100 + ")\n" + BODY, 1, 17),
        ("let x = 9223372036854775808\n" + BODY, 1, 9),
    ],
)
def test_huge_literals_are_located_and_python_limits_never_leak(cli, tmp_path, text, line, col):
    code, err, p = _check(cli, tmp_path, text)
    assert code == 2 and "is too large: ppir integers are at most 2**63 - 1" in err
    assert "Exceeds the limit" not in err and len(err.splitlines()[0]) < 300
    _located(err, p, line, col)


def test_huge_cells_in_a_csv_are_located(cli, tmp_path):
    code, err, p = _check(cli, tmp_path, "0F0,0B" + "5" * 6000 + "\n", name="t.csv")
    assert code == 2 and "Exceeds the limit" not in err
    _located(err, p, 1, 7)


@pytest.mark.parametrize(
    "expr",
    ["9223372036854775807 + 1", "-9223372036854775807 - 2", "3037000500 * 3037000500"],
)
def test_arithmetic_that_overflows_is_located(expr):
    with pytest.raises(PpirError, match="overflows") as e:
        load_text(f"let a = {expr}\n" + BODY, path="s.pps")
    assert e.value.kind == "integer-overflow" and e.value.diagnostics[0].span.line == 1


def test_repeated_squaring_stops_at_the_first_overflow_instead_of_growing():
    text = "def sq(x) = x * x\nlet a = sq(sq(sq(sq(sq(sq(sq(sq(10))))))))\n" + BODY
    with _quick(), pytest.raises(PpirError, match="overflows"):
        load_text(text, path="s.pps")


def test_huge_define_values_are_one_short_line(cli):
    with _quick():
        code, _, err = cli("check", "1f1b", "-D", "M=" + "9" * 5000)
    assert code == 2 and len(err.splitlines()) == 1 and len(err) < 200
    assert "-D M=99999999...9999 (5,000 digits): out of range" in err


def test_define_values_keep_their_old_message():
    from ppir.cli.common import parse_defines

    assert parse_defines(["P=4", "M= 8 ", "v=-1", "x=1_000"]) == {
        "P": 4,
        "M": 8,
        "v": -1,
        "x": 1000,
    }
    with pytest.raises(PpirError, match="the value of 'P' must be an integer, got 'four'"):
        parse_defines(["P=four"])


@pytest.mark.parametrize("text", ["٤", "４", "1٢"])  # Arabic-Indic, fullwidth, mixed
def test_define_values_are_ascii_digits(text):
    # int() reads these as 4, 4 and 12; a -D value is written in ASCII digits like the .pps
    from ppir.cli.common import parse_defines

    with pytest.raises(PpirError, match=f"'P' must be an integer in ASCII digits, got '{text}'"):
        parse_defines([f"P={text}"])


# ------------------------------------------------------------------ nesting
@pytest.mark.parametrize(
    "text, line, col",
    [
        ("let x = " + "1+" * 2000 + "1\n" + BODY, 1, 9),
        ("ranks 1\nlet x = " + "-" * 5000 + "1\n" + BODY, 2, 9),
        ("ranks 1\nmicrobatches 1\nprogram r {\n  " + "if 1 { " * 400 + "}" * 401, 4, 3),
        ("def f(x) = x\nrequire " + "f(" * 300 + "1" + ")" * 300 + ' : "x"\n' + BODY, 2, 9),
    ],
)
def test_deep_nesting_points_at_the_start_of_the_construct(cli, tmp_path, text, line, col):
    code, err, p = _check(cli, tmp_path, text)
    assert code == 2 and "nests deeper than ppir reads" in err
    _located(err, p, line, col)


def test_runaway_recursion_through_a_deep_body_is_located():
    text = "def f(n) = 1 + (1 + (1 + (1 + (1 + (1 + f(n - 1))))))\nlet y = f(5000)\n" + BODY
    with pytest.raises(PpirError) as e:
        load_text(text, path="s.pps")
    assert e.value.kind in ("too-deep", "recursion-limit")
    assert e.value.diagnostics[0].span is not None


def test_an_error_deep_in_a_recursion_notes_its_innermost_calls_only():
    """An error in a def's body gets a note at the call that failed, with its arguments; in a
    recursion only the three innermost calls are noted (not one per level), and the recursion
    cap's own error, at the call already, gets none."""
    text = "def f(n) = (n == 0) * (1 // n) + (n > 0) * f(n - 1)\nlet y = f(40)\n" + BODY
    with pytest.raises(PpirError) as e:
        load_text(text, path="s.pps")
    (d,) = e.value.diagnostics
    assert d.kind == "division-by-zero"
    assert [n.message for n in d.notes] == [
        "in the call f(0)",
        "in the call f(1)",
        "in the call f(2)",
    ]
    assert all(n.span.line == 1 for n in d.notes)  # the recursive call, in f's body
    text = "def f(n) = 1 + (1 + (1 + (1 + (1 + (1 + f(n - 1))))))\nlet y = f(5000)\n" + BODY
    with pytest.raises(PpirError) as e:
        load_text(text, path="s.pps")
    assert not e.value.diagnostics[0].notes


def test_parentheses_alone_do_not_count_as_nesting():
    load_text("let x = " + "(" * 3000 + "1" + ")" * 3000 + "\n" + BODY)


# ------------------------------------------------------------------ files and bytes
@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "   "])
def test_a_file_without_a_program_is_located_at_line_one(cli, tmp_path, text):
    code, err, p = _check(cli, tmp_path, text)
    assert code == 2 and "defines no program" in err
    _located(err, p, 1, 1)


@pytest.mark.parametrize(
    "data, line, col",
    [
        (b"ranks 1\n\xff\xfe\n", 2, 1),
        (b"ranks 1\nlet x = 1 # caf\xc3\xa9 \x80\n", 2, 18),  # é is one column
        (b"\xc3", 1, 1),
    ],
)
def test_bad_bytes_are_located_at_the_first_bad_byte(cli, tmp_path, data, line, col):
    code, err, p = _check(cli, tmp_path, data)
    assert code == 2 and "is not UTF-8" in err
    _located(err, p, line, col)


def test_bad_bytes_in_a_csv_are_located(cli, tmp_path):
    code, err, p = _check(cli, tmp_path, b"0F0,0B0\n1F0,\xff\n", name="t.csv")
    assert code == 2
    _located(err, p, 2, 5)


def test_carets_line_up_when_the_file_has_carriage_returns_and_form_feeds(cli, tmp_path):
    code, err, p = _check(
        cli, tmp_path, "ranks 1\r\n\x0c\nmicrobatches 1\r\nprogram r { Q(0) }\r\n"
    )
    assert code == 2
    _located(err, p, 4, 13)
    assert err.splitlines()[1] == "4 | program r { Q(0) }"


# ------------------------------------------------------------------ pending_w
@pytest.mark.parametrize("call", ["pending_w(0)", "pending_w()"])
def test_pending_w_at_top_level_is_a_located_error(cli, tmp_path, call):
    code, err, p = _check(cli, tmp_path, f"let q = {call}\n" + BODY)
    assert code == 2 and "use it inside a program block" in err
    _located(err, p, 1, 9)


def test_pending_w_in_a_function_called_from_a_program_counts_that_rank():
    text = (
        "def left(c) = pending_w(c)\nranks 1\nmicrobatches 2\n"
        "program r { F(0) I(0) F(1) I(1) for k in 0 .. left(0) { W(next) } }\n"
    )
    s = load_text(text)
    assert [str(a) for a in s.programs[0]] == ["0F0", "0I0", "0F1", "0I1", "0W0", "0W1"]


def test_a_20000_token_line_is_quoted_as_a_window(cli, tmp_path):
    ops = " ".join(f"0F{m} 0B{m}" for m in range(10_000))
    code, err, p = _check(cli, tmp_path, f"rank 0: {ops} 0F3\n")
    assert code == 1 and "0F3 appears twice" in err
    assert max(len(line) for line in err.splitlines()) < 200 and len(err) < 5_000
