"""torch CSV interop without torch: round trips, malformed-CSV diagnostics, the torch-csv backend.

Golden cases live in tests/golden/torch/: each ``NAME.csv`` has a ``NAME.run`` whose first line
says how to run it (``# RUN: ppir check {file} ...``); stderr and the exit status are compared
with ``NAME.err``.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from ppir.backends.torch_csv import export_csv
from ppir.backends.torch_csv.backend import flatten_groups

from ppir.diagnostics import PpirError
from ppir.frontend.csvio import read_action_text, read_csv_text, write_csv
from ppir.frontend.loader import load_schedule
from ppir.ir import Action, OpKind, Overlap
from ppir.passes import LowerComms
from ppir.schedules import builtin_names
from ppir.verify import verify

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "golden" / "torch"

GRID = [
    ("gpipe", {"P": 2, "M": 3}),
    ("gpipe", {"P": 4, "M": 8}),
    ("1f1b", {"P": 2, "M": 2}),
    ("1f1b", {"P": 4, "M": 8}),
    ("1f1b", {"P": 3, "M": 7}),
    ("interleaved_1f1b", {"P": 2, "M": 4, "v": 2}),
    ("interleaved_1f1b", {"P": 4, "M": 8, "v": 2}),
    ("interleaved_1f1b", {"P": 2, "M": 6, "v": 3}),
    ("interleaved_vshape", {"P": 2, "M": 4, "v": 2}),
    ("interleaved_vshape", {"P": 4, "M": 8, "v": 4}),
    ("looped_bfs", {"P": 2, "M": 3, "v": 2}),
    ("looped_bfs", {"P": 4, "M": 8, "v": 3}),
    ("interleaved_zb", {"P": 2, "M": 4, "v": 2}),
    ("interleaved_zb", {"P": 4, "M": 8, "v": 2}),
    ("zb_h1", {"P": 3, "M": 5}),
    ("zb_h1", {"P": 4, "M": 8}),
    ("zb_h2", {"P": 3, "M": 5}),
    ("zb_h2", {"P": 4, "M": 8}),
    ("zbv", {"P": 2, "M": 4}),
    ("zbv", {"P": 4, "M": 8}),
    ("v_half", {"P": 4, "M": 8}),
    ("v_min", {"P": 4, "M": 8}),
    ("dualpipev", {"P": 2, "M": 4}),
    ("dualpipev", {"P": 4, "M": 8}),
    ("dualpipev", {"P": 3, "M": 10}),
]
NOT_EXPORTED = {"dualpipe"}  # two pipelines: torch runs one (tests/test_dualpipe.py)


def test_round_trip_grid_covers_every_builtin():
    assert {name for name, _ in GRID} | NOT_EXPORTED == set(builtin_names())


@pytest.mark.parametrize("name,params", GRID, ids=lambda x: str(x))
def test_round_trip_is_identity(name, params):
    """ppir -> compute_only CSV -> ppir gives the same programs, placement and sizes."""
    s = load_schedule(name, params)
    low = LowerComms().apply(s)
    text = export_csv(low, "compute_only")
    back = read_csv_text(text, f"<rt>/{name}.csv")
    assert back.programs == s.compute_only().programs
    assert (back.ranks, back.stages, back.microbatches, back.placement) == (
        s.ranks,
        s.stages,
        s.microbatches,
        s.placement,
    )
    assert text == write_csv(s)  # the lowering's comms are dropped, not leaked
    assert "SEND" not in text and "REDUCE_GRAD" not in text
    overlaps = [str(it) for prog in s.programs for it in prog if isinstance(it, Overlap)]
    assert sum(text.count(o) for o in set(overlaps)) == len(overlaps)  # one cell each, as torch


@pytest.mark.parametrize("fmt", ["compute_only", "compute_comms"])
def test_dualpipev_exports_overlapped_steps_as_torch_writes_them(fmt):
    """DualPipeV's overlapped F&B is one cell, (0F7;7B3)OVERLAP_F_B, in both formats (torch's
    _Action.__repr__ and from_str spell it so); before, it was split into 0F7,7B3 and the
    file read back as a different program (step time 27 -> 25.5)."""
    low = LowerComms().apply(load_schedule("dualpipev", {"P": 4, "M": 8}))
    text = export_csv(low, fmt)
    assert "(0F7;7B3)OVERLAP_F_B" in text.splitlines()[0].split(",")
    assert ",0F7,7B3," not in text
    back = read_csv_text(text, "<dpv>.csv")
    assert (
        back.programs
        == (low.compute_only() if fmt == "compute_only" else flatten_groups(low)).programs
    )


@pytest.mark.parametrize(
    "name,params", GRID[:6] + [g for g in GRID if g[0] in ("zbv", "dualpipev")], ids=str
)
def test_compute_comms_round_trip(name, params):
    """compute_comms CSV reads back as the lowered programs with groups flattened; the result
    still verifies under rendezvous semantics with one FIFO per rank (flattening in posting
    order would deadlock 1F1B at P=4); every stage gets one REDUCE_GRAD, after its last
    backward."""
    low = LowerComms().apply(load_schedule(name, params))
    text = export_csv(low, "compute_comms")
    back = read_csv_text(text, f"<rtc>/{name}.csv")
    flat = flatten_groups(low)
    assert back.programs == flat.programs
    assert [sorted(map(str, low.actions(r))) for r in range(low.ranks)] == [
        sorted(map(str, back.actions(r))) for r in range(back.ranks)
    ]
    assert verify(back).ok
    naive_flat = read_csv_text(write_csv(low, compute_only=False), f"<nf>/{name}.csv")
    if (name, params) == ("1f1b", {"P": 4, "M": 8}):
        assert not verify(naive_flat).ok
    for r, row in enumerate(text.splitlines()):
        cells = row.split(",")
        for s in low.stages_of_rank[r]:
            assert cells.count(f"{s}REDUCE_GRAD") == 1
            last_bw = max(
                i
                for i, c in enumerate(cells)
                if c in (f"{s}B{m}" for m in range(low.microbatches))
                or c in (f"{s}W{m}" for m in range(low.microbatches))
            )
            assert cells.index(f"{s}REDUCE_GRAD") == last_bw + 1


def _golden_cases():
    return sorted(CASES.glob("*.csv"))


@pytest.mark.parametrize("path", _golden_cases(), ids=lambda p: p.name)
def test_torch_csv_golden(path, cli, golden, monkeypatch):
    monkeypatch.chdir(ROOT)
    first = path.with_suffix(".run").read_text().splitlines()[0]
    assert first.startswith("# RUN: ppir ")
    argv = shlex.split(
        first[len("# RUN: ppir ") :].replace("{file}", path.relative_to(ROOT).as_posix())
    )
    code, _, err = cli(*argv)
    assert code in (1, 2) and "Traceback" not in err
    assert err.startswith(f"tests/golden/torch/{path.name}:"), err  # file:row:col first
    golden(f"torch/{path.stem}.err", f"exit {code}\n{err}")


def test_ragged_rows_and_idle_cells_are_fine():
    """torch writes idle slots as empty cells and does not pad rows: rows of any length, empty
    cells anywhere, trailing blank lines and torch's bookkeeping actions are all accepted."""
    text = "0UNSHARD,0F0,,0F1,,,0B0,0B1,0REDUCE_GRAD,0RESHARD,,,\n,1F0,1B0,1F1,1B1\n\n\n"
    s = read_csv_text(text, "<ragged>.csv")
    assert [str(a) for a in s.actions(0)] == ["0F0", "0F1", "0B0", "0B1"]
    assert [str(a) for a in s.actions(1)] == ["1F0", "1B0", "1F1", "1B1"]
    assert s.ranks == 2 and s.microbatches == 2
    low = LowerComms().apply(s)
    assert verify(low).ok


def test_a_none_cell_is_told_to_be_empty_and_an_empty_file_names_its_path_once():
    """A dataframe's empty cell written as 'None' got only the generic hint; an empty file's
    message repeated its path after the location ('x.csv:1:1: error: x.csv: the file ...')."""
    with pytest.raises(PpirError) as e:
        read_csv_text("0F0,None,0B0\n", "<none>.csv")
    (d,) = e.value.diagnostics
    assert d.hints[0] == "a step with no action is an empty cell (',,'), not 'None'"
    assert (d.span.line, d.span.col) == (1, 5)
    with pytest.raises(PpirError) as e:
        read_csv_text("\n\n", "x.csv")
    assert e.value.diagnostics[0].render().splitlines()[0] == (
        "x.csv:1:1: error: the file holds no actions"
    )


def test_cell_columns_point_at_the_cell():
    s = read_csv_text("0F0, 0F1,,0B0,0B1\n1F0,1B0,1F1,1B1\n", "<cols>.csv")
    spans = [(a.span.line, a.span.col, a.span.end_col) for a in s.actions(0)]
    assert spans == [(1, 1, 4), (1, 6, 9), (1, 11, 14), (1, 15, 18)]


def test_overlap_cell_becomes_an_overlapped_step():
    text = "0F0,0F1,(0F2;0B0)OVERLAP_F_B,0B1,0B2\n1F0,1B0,1F1,1B1,1F2,1B2\n"
    s = read_csv_text(text, "<ovl>.csv")
    step = s.programs[0][2]
    assert isinstance(step, Overlap) and str(step) == "(0F2;0B0)OVERLAP_F_B"
    acts = list(s.actions(0))
    assert [str(a) for a in acts] == ["0F0", "0F1", "0F2", "0B0", "0B1", "0B2"]
    assert (acts[2].span.col, acts[3].span.col) == (10, 14)  # each sub-action keeps its column


def test_overlap_cell_not_forward_then_backward_becomes_its_actions_in_order():
    text = "0F0,0F1,0F2,(0B0;0B1)OVERLAP_F_B,0B2\n1F0,1B0,1F1,1B1,1F2,1B2\n"
    s = read_csv_text(text, "<ovl>.csv")
    assert not any(isinstance(it, Overlap) for it in s.programs[0])
    assert [str(it) for it in s.programs[0]] == ["0F0", "0F1", "0F2", "0B0", "0B1", "0B2"]


def test_import_notes_overlapped_cells_it_splits(tmp_path, cli):
    f = tmp_path / "ovl.csv"
    f.write_text("0F0,0F1,(0F2;0B0)OVERLAP_F_B,(0B1;0B2)OVERLAP_F_B\n1F0,1B0,1F1,1B1,1F2,1B2\n")
    code, out, err = cli("import", str(f))
    assert code == 0, err
    assert "(0F2;0B0)OVERLAP_F_B" in out and "0B1 0B2" in out.replace("\n", " ")
    assert "ppir: note: 1 overlapped cell (a;b)OVERLAP_F_B that is not a forward" in err


def test_import_refuses_to_write_an_invalid_program(tmp_path, cli):
    """ppir import verifies what it read: an invalid program is reported with the verifier's
    diagnostics (exit 1) and not written; --no-verify writes it as it is."""
    f = tmp_path / "bad.csv"
    f.write_text("0F0,0B0\n1B0,1F0\n")  # B before F on rank 1
    out = tmp_path / "bad.pps"
    code, stdout, err = cli("import", str(f), "-o", str(out))
    assert code == 1 and stdout == "" and not out.exists()
    assert "bad.csv:2:1: error:" in err and "1B0" in err and "Traceback" not in err
    assert f"ppir: error: {f} does not verify: nothing written" in err
    assert "hint: ppir import --no-verify writes it as it is" in err
    code, stdout, err = cli("import", str(f), "--no-verify")
    assert code == 0 and "rank 1: 1B0 1F0" in stdout and not err


def test_placement_given_and_validated():
    text = "0F0,0F1,3F0,3F1,3B0,3B1,0B0,0B1\n1F0,1F1,2F0,2F1,2B0,2B1,1B0,1B1\n"
    s = read_csv_text(text, "<v>.csv")  # inferred: a V placement
    assert s.placement == (0, 1, 1, 0)
    assert read_csv_text(text, "<v>.csv", placement=(0, 1, 1, 0)).placement == (0, 1, 1, 0)
    with pytest.raises(PpirError) as e:
        read_csv_text(text, "<v>.csv", placement=(0, 1, 2, 0))
    assert e.value.kind == "bad-placement"
    with pytest.raises(PpirError) as e:
        read_csv_text(text, "<v>.csv", placement=(0, 1, 0, 1))
    assert e.value.kind == "placement-conflict"


def test_action_text_import(tmp_path, cli):
    """torch action text, as `" ".join(map(str, pipeline_order[r]))` prints (None = idle)."""
    text = "# 1F1B P=2 M=2\n0F0 0F1 None 0B0 0B1\n\n1F0 1B0 1F1 1B1\n"
    s = read_action_text(text, "<txt>")
    assert s.ranks == 2 and [str(a) for a in s.actions(0)] == ["0F0", "0F1", "0B0", "0B1"]
    f = tmp_path / "sched.txt"
    f.write_text(text)
    code, out, err = cli("import", str(f), "-o", str(tmp_path / "sched.pps"))
    assert code == 0 and out == f"wrote {tmp_path / 'sched.pps'}\n", err  # as synth, viz say
    code, out, err = cli("check", str(tmp_path / "sched.pps"))
    assert code == 0 and out.startswith("ok: sched()"), err


def test_import_csv_prints_reparseable_pps(tmp_path, cli):
    (tmp_path / "my sched é.csv").write_text(write_csv(load_schedule("gpipe", {"P": 2, "M": 2})))
    code, out, err = cli("import", str(tmp_path / "my sched é.csv"))
    assert code == 0 and "schedule my_sched__()" in out, err  # a stem the header cannot hold
    f = tmp_path / "my-sched.csv"
    f.write_text(write_csv(load_schedule("interleaved_1f1b", {"P": 2, "M": 4, "v": 2})))
    code, out, err = cli("import", str(f))
    assert code == 0, err
    assert "schedule my-sched()" in out and "placement looped" in out  # the grammar's name
    (tmp_path / "x.pps").write_text(out)
    again = load_schedule(str(tmp_path / "x.pps"))
    assert again.name == "my-sched"
    assert again.programs == load_schedule("interleaved_1f1b", {"P": 2, "M": 4, "v": 2}).programs


def test_compile_torch_csv_backend(tmp_path, cli):
    out = tmp_path / "o.csv"
    code, stdout, err = cli(
        "compile", "1f1b", "-D", "P=2", "-D", "M=3", "--backend", "torch-csv", "-o", str(out)
    )
    assert code == 0, err
    assert out.read_text() == "0F0,0F1,0B0,0F2,0B1,0B2\n1F0,1B0,1F1,1B1,1F2,1B2\n"
    assert "_load_csv" in stdout and not err  # the confirmation is output; stderr diagnostics
    code, stdout, err = cli(
        "compile",
        "1f1b",
        "-D",
        "P=2",
        "-D",
        "M=2",
        "--backend",
        "torch-csv",
        "--csv-format",
        "compute_comms",
    )
    assert code == 0, err
    rows = stdout.splitlines()
    assert rows[0].split(",")[-1] == "0REDUCE_GRAD" and "0SEND_F0" in rows[0]
    assert rows[1].startswith("1RECV_F0,1F0")


def test_compile_refuses_an_invalid_schedule(tmp_path, cli):
    bad = tmp_path / "bad.csv"
    bad.write_text("0F0,0B0\n1B0,1F0\n")  # B before F on rank 1
    code, stdout, err = cli("compile", str(bad), "--backend", "torch-csv")
    assert code == 1 and stdout == "" and "error:" in err


def test_torch_missing_is_a_diagnostic(monkeypatch, cli):
    for mod in (
        "torch",
        "torch.distributed",
        "torch.distributed.pipelining",
        "torch.distributed.pipelining.schedules",
    ):
        monkeypatch.setitem(sys.modules, mod, None)
    code, _, err = cli("check", "torch:GPipe", "-D", "P=2")
    assert code == 2 and "Traceback" not in err
    assert "ppir: error: torch schedules need PyTorch" in err and "pip install" in err


def test_show_takes_torch_specs_and_defines_for_them_only(monkeypatch, cli):
    code, _, err = cli("show", "1f1b", "-D", "P=2")
    assert code == 2 and "Traceback" not in err
    assert "-D P=2 applies to torch:NAME only" in err and "ppir dump 1f1b -D" in err
    monkeypatch.setitem(sys.modules, "torch.distributed.pipelining", None)
    code, _, err = cli("show", "torch:GPipe")  # read as torch's class, not as a file name
    assert code == 2 and "ppir: error: torch schedules need PyTorch" in err
    assert "no such file" not in err


def test_unknown_torch_schedule_and_parameter(cli):
    code, _, err = cli("import", "torch:Interleaved1f1b_", "-D", "P=2")
    assert code == 2 and "did you mean 'Interleaved1F1B'?" in err
    code, _, err = cli("check", "torch:GPipe", "-D", "v=2")
    assert code == 2 and err.splitlines() == [
        "ppir: error: unknown parameter 'v' (-D v=2) for schedule 'torch:GPipe'",
        "hint: its parameters: P, M",
    ]


def test_parse_cell_kinds():
    from ppir.frontend.csvio import parse_cell
    from ppir.ir import Span

    sp = Span("<c>", 1, 1, 1, 2)
    assert parse_cell("3SEND_F1", sp) == [Action(3, OpKind.SEND_F, 1)]
    assert parse_cell("2I10", sp) == [Action(2, OpKind.I, 10)]
    assert parse_cell("0REDUCE_GRAD", sp) == []
    for bad in ("F0", "2F", "2F-1", "2Q0", "2F0 1F1", "(0F0;0B0)", "(0F0;0B0)OVERLAP_F_Bx"):
        with pytest.raises(PpirError):
            parse_cell(bad, sp)


def test_an_overlapped_cell_whose_backward_needs_the_other_rank_is_a_cycle_said_so(tmp_path, cli):
    """The overlapped step is atomic, so its B waiting on rank 1 makes its F wait too: the
    cycle's note says so (it said '0F0 comes after 1B0 in rank 0's program')."""
    f = tmp_path / "d.csv"
    f.write_text("(0F0;0B0)OVERLAP_F_B\n1F0,1B0\n")
    code, out, err = cli("check", str(f))
    assert code == 1 and "order-cycle" not in out
    assert (
        "0F0 (rank 0, step 0) runs in one overlapped step with 0B0, which needs the output" in err
    )
    assert "in rank 0's program" not in err


def test_a_placement_longer_than_the_stages_used_is_refused(cli, tmp_path):
    """--placement 0,1,0,1,0 on a 4-stage CSV made a 5-stage schedule whose stage 4 runs
    nothing, reported as '4F0 is missing' at the file's first cell (exit 1)."""
    f = tmp_path / "v.csv"
    f.write_text("0F0,0F1,2F0,2F1,2B0,2B1,0B0,0B1\n1F0,1F1,3F0,3F1,3B0,3B1,1B0,1B1\n")
    code, out, err = cli("check", str(f), "--placement", "0,1,0,1,0")
    assert code == 2 and out == ""
    assert err == (
        "ppir: error: --placement lists 5 stages but the schedule uses 4 stages (0..3)\n"
    )


def test_an_output_named_for_the_other_format_is_refused(cli, tmp_path):
    """'ppir import torch.csv -o torch.csv' overwrote the user's torch CSV with .pps text, and
    'ppir import ... -o x.csv' / 'compile --backend torch-csv -o x.pps' wrote files that every
    ppir command then read in the wrong format ('unknown action '# imported by ppir ...'').
    Both are refused (exit 2) before anything is written."""
    src = tmp_path / "sched.csv"
    text = "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n"
    src.write_text(text)
    code, out, err = cli("import", str(src), "-o", str(src))
    assert code == 2 and out == "" and src.read_text() == text
    assert err.startswith(f"ppir: error: -o {src}: ppir import writes .pps text, and a .csv ")
    for name in ("x.txt", "x.json"):
        code, _, err = cli("import", str(src), "-o", str(tmp_path / name))
        assert code == 2 and not (tmp_path / name).exists(), err
    pps = tmp_path / "x.pps"
    code, _, err = cli("compile", str(src), "--backend", "torch-csv", "-o", str(pps))
    assert code == 2 and not pps.exists()
    assert f"-o {pps}: --backend torch-csv writes torch's CSV, and ppir reads a .pps" in err
    assert cli("import", str(src), "-o", str(pps))[0] == 0 and pps.read_text().startswith("#")


def test_a_rank_without_actions_is_located_at_its_own_row():
    # was: at the first row (rank 0's), with a hint in .pps words ('ranks', program numbers)
    text = "# two ranks\n0F0 0B0\nNone\n1F0 1B0\n"
    with pytest.raises(PpirError) as e:
        read_action_text(text, "order.txt")
    d = e.value.diagnostics[0]
    assert (str(d.span), d.message) == ("order.txt:3:1", "rank 1 holds no stage: it has no actions")
    assert "each row is one rank's program" in e.value.render()
    s = read_action_text(text, "order.txt", placement=(0, 2))  # an idle rank, given so
    assert s.placement == (0, 2) and s.ranks == 3


def test_import_names_the_parameter_action_text_does_not_take(cli, tmp_path):
    # was: 'action text takes no -D parameters', naming no parameter (a CSV's names it)
    f = tmp_path / "order.txt"
    f.write_text("0F0 0B0\n1F0 1B0\n")
    code, out, err = cli("import", str(f), "-D", "P=2")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"ppir: error: unknown parameter 'P' (-D P=2) for {f}",
        "hint: torch action text takes no parameters: it is one fixed program",
    ]
    csv = tmp_path / "order.csv"
    csv.write_text("0F0,0B0\n1F0,1B0\n")
    assert cli("import", str(csv), "-D", "P=2")[2].splitlines() == [
        f"ppir: error: unknown parameter 'P' (-D P=2) for {csv}",
        "hint: a CSV schedule takes no parameters: it is one fixed program",
    ]


@pytest.mark.parametrize(
    "rows, message, at",
    [
        # a 50/50 split: the home is the rank whose only stage it is, not the first rank (the
        # hint moved 1B0 to rank 0 and left rank 1 with no stage)
        (["0F0,1F0,0B0", "1B0"], "stage 1 runs on rank 0 and on rank 1", "1F0"),
        # a stage on three ranks names them all (it named two)
        (
            ["0F0,0F1,0B0,0B1,1F0", "1F1,1B0,1B1", "1F0,2F0,2F1,2B0,2B1"],
            "stage 1 runs on rank 0 and on ranks 1 and 2",
            "1F0",
        ),
    ],
)
def test_placement_conflict_points_at_the_stray_action(rows, message, at):
    with pytest.raises(PpirError) as e:
        read_csv_text("\n".join(rows) + "\n", "<c>.csv")
    [d] = e.value.diagnostics
    assert d.kind == "placement-conflict" and d.message.startswith(message + ";"), d.message
    assert d.hints == (f"move {at} to rank 1, or correct its stage index",)


@pytest.mark.parametrize(
    "text,stage,where",
    [
        ("0F0,0B0\n2F0,2B0\n", 1, (2, 1)),  # stage 1 skipped: rank 1 computes stage 2
        ("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,2SEND_B0\n", 2, (2, 18)),  # a typo
    ],
)
def test_a_stage_no_row_computes_gets_a_hint_a_csv_can_follow(text, stage, where):
    """A CSV whose stage numbers skip one, or a SEND/RECV naming a stage nothing computes, was
    told "declare 'placement [...]' (or pass --placement)": a CSV declares nothing, and a
    placement for the extra stage only moves the error to its missing F and B."""
    with pytest.raises(PpirError) as e:
        read_csv_text(text, "<gap>.csv")
    d = e.value.diagnostics[0]
    assert d.kind == "placement-unknown" and (d.span.line, d.span.col) == where
    assert d.message == f"stage {stage} runs on no rank, so its placement is unknown"
    assert "declare" not in " ".join(d.hints)
    assert d.hints == (
        f"no row computes stage {stage} (no {stage}F, {stage}B, {stage}I or {stage}W): stages "
        f"are numbered from 0 without gaps, so check the actions' stage indices",
    )
