"""Golden tests for the verifier: a corpus of known-bad schedules, one or more per check.

Each case under tests/verify_corpus/ is a .pps file (or a .csv or a ``ppir.program/1`` .json with
a .run file beside it) whose header says how to run it (``# RUN: ppir check {file} ...``) and
what must be found (``# EXPECT: kind line:col``: a diagnostic of that kind whose primary span
starts there).  The rendered stderr and the exit status are compared with
tests/golden/verify/<name>.err.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from ppir.frontend.loader import load_schedule
from ppir.passes import LowerComms
from ppir.verify import KINDS, verify

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "verify_corpus"


def _cases() -> list[Path]:
    return sorted(p for p in CORPUS.iterdir() if p.suffix in (".pps", ".csv", ".json"))


def _header(path: Path) -> tuple[list[str], list[tuple[str, int, int]]]:
    src = path.with_suffix(".run") if path.suffix in (".csv", ".json") else path
    lines = src.read_text().splitlines()
    assert lines[0].startswith("# RUN: ppir "), f"{src} lacks a '# RUN: ppir ...' line"
    rel = path.relative_to(ROOT).as_posix()
    argv = shlex.split(lines[0][len("# RUN: ppir ") :].replace("{file}", rel))
    expects = []
    for line in lines[1:]:
        if line.startswith("# EXPECT: "):
            kind, loc = line[len("# EXPECT: ") :].split()
            ln, col = loc.split(":")
            expects.append((kind, int(ln), int(col)))
    assert expects, f"{src} lacks an '# EXPECT: kind line:col' line"
    return argv, expects


@pytest.mark.parametrize("path", _cases(), ids=lambda p: p.name)
def test_corpus_golden(path, cli, golden, monkeypatch):
    monkeypatch.chdir(ROOT)
    argv, expects = _header(path)
    code, out, err = cli(*argv)
    assert code == 1, f"expected exit 1 (invalid schedule), got {code}\n{err}"
    assert "Traceback" not in err
    golden(f"verify/{path.name}.err", f"exit {code}\n{err}")
    # The same run as JSON: the expected kind at the expected place, as an error.
    code, out, _ = cli(*argv, "--format", "json")
    data = json.loads(out)
    assert code == 1 and data["ok"] is False
    found = {
        (d["kind"], d["span"]["line"], d["span"]["col"])
        for d in data["diagnostics"]
        if d["span"] and d["severity"] == "error"
    }
    for kind, line, col in expects:
        assert (kind, line, col) in found, (kind, line, col, sorted(found))


def test_corpus_covers_every_check(monkeypatch):
    """Every error kind and every lint of the verifier has at least one corpus case."""
    monkeypatch.chdir(ROOT)
    kinds = {k for p in _cases() for k, _, _ in _header(p)[1]}
    kinds.add("group-too-large")  # built in test_group_too_large (the file would be huge)
    assert set(KINDS) <= kinds, sorted(set(KINDS) - kinds)


def test_naive_1f1b_deadlock_witness(cli, golden):
    """The naive lowering of 1F1B deadlocks under rendezvous semantics; the witness names the
    two ranks, the op each is blocked on, its source line and the grid around the stuck point."""
    code, out, err = cli("check", "1f1b", "-D", "P=4", "-D", "M=8", "--lowering", "naive")
    assert code == 1
    golden("verify/naive_1f1b.err", f"exit {code}\n{err}")
    assert "error: deadlock: ranks 2 and 3 wait for each other" in err
    assert "rank 2 is blocked at step 5 on 2SEND_F1 (sends to rank 3)" in err
    assert "rank 3 is blocked at step 3 on 3SEND_B0 (sends to rank 2)" in err


def test_naive_1f1b_is_ok_with_lockstep(cli):
    code, out, err = cli("check", "1f1b", "-D", "P=4", "-D", "M=8")
    assert code == 0 and err == "" and out.startswith("ok: 1f1b(P=4, M=8)")


def test_three_rank_cycle_is_fine_under_relaxed_progress(cli, monkeypatch):
    """Rank 0's recv from rank 2 blocks its send to rank 1 only under FIFO progress."""
    monkeypatch.chdir(ROOT)
    code, out, err = cli(
        "check", "tests/verify_corpus/three_rank_cycle.pps", "--progress-model", "relaxed"
    )
    assert code == 0, err
    assert "relaxed progress" in out
    code, _, err = cli("check", "tests/verify_corpus/three_rank_cycle.pps")
    assert code == 1 and "would complete under --progress-model relaxed" in err


def test_send_send_deadlocks_under_relaxed_progress_too(monkeypatch):
    monkeypatch.chdir(ROOT)
    s = load_schedule("tests/verify_corpus/send_send.pps")
    for progress in ("fifo", "relaxed"):
        kinds = [d.kind for d in verify(s, progress=progress).errors]
        assert kinds == ["deadlock"], (progress, kinds)


def test_lints_are_warnings_unless_strict(monkeypatch):
    monkeypatch.chdir(ROOT)
    for name, kind in (
        ("asymmetric_group", "asymmetric-group"),
        ("mixed_batched", "mixed-batched"),
    ):
        s = load_schedule(f"tests/verify_corpus/{name}.pps")
        rep = verify(s)
        assert rep.ok and [d.kind for d in rep.warnings] == [kind]
        rep = verify(s, strict=True)
        assert not rep.ok and [d.kind for d in rep.errors] == [kind]


def test_group_too_large():
    """GPipe with 257 microbatches posted as one group per direction: 257 ops > 256."""
    M = 257
    text = "\n".join(
        [
            "ranks 2",
            "stages 2",
            f"microbatches {M}",
            "rank 0: "
            + " ".join(f"0F{m}" for m in range(M))
            + " ["
            + " ".join(f"0SEND_F{m}" for m in range(M))
            + "]"
            + " ["
            + " ".join(f"0RECV_B{m}" for m in range(M))
            + "] "
            + " ".join(f"0B{m}" for m in range(M)),
            "rank 1: ["
            + " ".join(f"1RECV_F{m}" for m in range(M))
            + "] "
            + " ".join(f"1F{m} 1B{m}" for m in range(M))
            + " ["
            + " ".join(f"1SEND_B{m}" for m in range(M))
            + "]",
        ]
    )
    from ppir.frontend.loader import load_text

    s = load_text(text, path="<big>")
    rep = verify(s)
    assert rep.ok
    assert [d.kind for d in rep.warnings] == ["group-too-large"] * 4
    assert "holds 257 ops, more than NCCL's 256" in rep.warnings[0].message
    assert rep.warnings[0].span.line == 4
    assert [d.kind for d in verify(s, strict=True).errors] == ["group-too-large"] * 4


def test_vshape_odd_v_order_cycle():
    """interleaved_vshape's warm-up formula assumes an even v (the built-in now requires it).
    Without that requirement, v=3 has a cyclic compute order and the verifier says so."""
    from ppir.frontend.loader import load_text
    from ppir.schedules import builtin_source

    lines = [
        ln
        for ln in builtin_source("interleaved_vshape").splitlines()
        if not (ln.startswith("require") and "v % 2" in ln)
    ]
    assert len(lines) < len(builtin_source("interleaved_vshape").splitlines())
    s = load_text("\n".join(lines), {"P": 2, "M": 4, "v": 3}, path="<vshape-odd-v>")
    errs = verify(LowerComms().apply(s)).errors
    assert [d.kind for d in errs] == ["order-cycle"]
    assert "compute order has a cycle" in errs[0].message


def test_microbatch_out_of_range_exits_1_written_out_or_expanded(cli, tmp_path):
    """A program naming microbatch M is understood but wrong (exit 1) whether its ops are
    written out (a literal SEND of microbatch M, which the verifier's out-of-range reports) or
    expanded from a program block (the expander's microbatch-out-of-range); the expanded one
    exited 2, as for input ppir cannot use."""
    literal = tmp_path / "literal.pps"
    literal.write_text(
        "ranks 2\nstages 2\nmicrobatches 2\n"
        "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1\n"
        "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B2\n"
    )
    expanded = tmp_path / "expanded.pps"
    expanded.write_text(
        "schedule e(P = 2, M = 2)\nranks P\nmicrobatches M\n"
        "program r {\n  for m in 0 .. M { F(m) }\n  for m in 0 .. M + 1 { B(m) }\n}\n"
    )
    code, _, err = cli("check", str(literal))
    assert code == 1 and "1SEND_B2 on rank 1 names microbatch 2, out of range 0..1" in err
    code, _, err = cli("check", str(expanded))
    assert code == 1 and "microbatch 2 is out of range 0..1 (microbatches = 2)" in err, err
    code, out, _ = cli("check", str(expanded), "--format", "json")
    assert code == 1 and json.loads(out)["diagnostics"][0]["kind"] == "microbatch-out-of-range"
