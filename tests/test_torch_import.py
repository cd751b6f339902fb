"""Importing torch.distributed.pipelining's built-ins, and what torch's own checks miss.

Needs torch (skipped otherwise); one process, no process group.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

pytest.importorskip("torch")

from ppir.backends.torch_csv import export_csv  # noqa: E402
from torch.distributed.pipelining import schedules as sch  # noqa: E402

from ppir.frontend.csvio import read_csv_text, write_csv  # noqa: E402
from ppir.frontend.loader import load_schedule  # noqa: E402
from ppir.frontend.torch_import import NAMES, SINGLE, load_torch_builtin, torch_schedule_object  # noqa: E402
from ppir.ir import Overlap  # noqa: E402
from ppir.passes import LowerComms  # noqa: E402
from ppir.verify import verify  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "torch"


def _params(name, P, M, v=2):
    return {"P": P, "M": M} | ({} if name in SINGLE else {"v": v})


def _torch_cells(obj, P):
    """torch's order as text, independently of ppir: None and REDUCE_GRAD dropped, overlapped
    cells split into their sub-actions."""
    out = []
    for r in range(P):
        row = []
        for a in obj.pipeline_order[r]:
            if a is None or a.computation_type == sch.REDUCE_GRAD:
                continue
            row.extend(map(str, a.sub_actions) if a.sub_actions else [str(a)])
        out.append(row)
    return out


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("P,M", [(2, 4), (4, 8)])
def test_import_is_what_torch_produces(name, P, M):
    s = load_torch_builtin(name, _params(name, P, M))
    obj = torch_schedule_object(name, P, M, 1 if name in SINGLE else 2)
    assert [[str(a) for a in s.actions(r)] for r in range(P)] == _torch_cells(obj, P)
    if name not in SINGLE:
        assert s.placement == tuple(obj.stage_index_to_group_rank[i] for i in range(s.stages))
    report = verify(LowerComms().apply(s))
    # torch 2.13's 1F1B order mislabels the last rank's forwards: ppir says so, the rest verify.
    assert report.ok == (name != "1F1B"), [d.message for d in report.diagnostics]


def test_torch_1f1b_last_rank_mislabelled(cli, golden, monkeypatch):
    """The finding, end to end: ppir names the first bad cell (3F8, microbatch out of range) and
    the missing 3F0; torch's own validator rejects its own order too, without a location."""
    monkeypatch.chdir(ROOT)
    code, _, err = cli("check", "torch:1F1B", "-D", "P=4", "-D", "M=8")
    assert code == 1
    assert "<torch>/1F1B_P4_M8.csv:4:" in err and "3F8" in err
    golden("torch/torch_1f1b_P4_M8.err", f"exit {code}\n{err}")
    obj = torch_schedule_object("1F1B", 4, 8, 1)
    order = {
        r: [a for a in obj.pipeline_order[r] if a.computation_type != sch.REDUCE_GRAD]
        for r in range(4)
    }
    with pytest.raises(AssertionError, match="without first running Forward"):
        sch._validate_schedule(order, 4, 4, 8)


@pytest.mark.parametrize("P,M", [(1, 1), (2, 2), (4, 8)])
def test_import_of_torch_1f1b_is_refused_with_the_verifiers_diagnostics(cli, tmp_path, P, M):
    """torch's 1F1B order is invalid at every size torch accepts: ppir import said nothing and
    wrote it (exit 0; 'ppir check' then rejected it).  It now reports it (exit 1) and writes
    nothing; the other classes verify wherever torch's constructor accepts the sizes
    (bench/torch_builtins_check.py)."""
    out = tmp_path / "t.pps"
    argv = ["import", "torch:1F1B", "-D", f"P={P}", "-D", f"M={M}", "-o", str(out)]
    code, stdout, err = cli(*argv)
    assert code == 1 and not out.exists() and "Traceback" not in err
    assert (
        f"<torch>/1F1B_P{P}_M{M}.csv:{P}:" in err and f"names microbatch {M}, out of range" in err
    )
    assert "ppir: error: torch:1F1B does not verify: nothing written" in err
    assert "torch's Schedule1F1B builds its pipeline_order wrong on the last rank" in err
    code, stdout, err = cli(*argv, "--no-verify")
    assert code == 0 and out.exists() and f"rank {P - 1}: {P - 1}F1 " in out.read_text()


def test_cli_import_and_every_command_accepts_torch_specs(cli, tmp_path):
    argv = ["torch:Interleaved1F1B", "-D", "P=4", "-D", "M=8", "-D", "v=2"]
    code, out, err = cli("import", *argv)
    assert code == 0, err
    assert "schedule torch_Interleaved1F1B(P = 4, M = 8, v = 2)" in out
    (tmp_path / "i.pps").write_text(out)
    assert (
        load_schedule(str(tmp_path / "i.pps")).programs
        == load_torch_builtin("Interleaved1F1B", {"P": 4, "M": 8, "v": 2}).programs
    )
    code, out, err = cli("check", *argv)
    assert code == 0 and out.startswith("ok: torch_Interleaved1F1B(P=4, M=8, v=2)"), err
    code, out, err = cli("compile", *argv, "--backend", "torch-csv")
    assert code == 0 and out.splitlines()[0].startswith("0F0,0F1,0F2,0F3,4F0"), err


def test_show_accepts_torch_specs_and_prints_what_import_prints(cli):
    """'ppir show torch:GPipe' said "no such file or built-in schedule: 'torch:GPipe'"."""
    argv = ["torch:Interleaved1F1B", "-D", "P=2", "-D", "M=4", "-D", "v=2"]
    code, out, err = cli("show", *argv)
    assert code == 0 and not err
    assert out == cli("import", *argv)[1]
    assert "schedule torch_Interleaved1F1B(P = 2, M = 4, v = 2)" in out
    code, out, err = cli("show", "torch:GPipe")  # torch's defaults here too: P=4, M=8
    assert code == 0 and "schedule torch_GPipe(P = 4, M = 8)" in out
    code, out, err = cli("show", "torch:1F1B", "-D", "P=2", "-D", "M=2")  # verified as import
    assert code == 1 and out == "" and "torch:1F1B does not verify" in err


@pytest.mark.parametrize("P,M", [(2, 4), (4, 8), (4, 12), (6, 12)])
def test_torch_dualpipev_is_ppirs_dualpipev(P, M):
    """torch's DualPipeV (its overlapped cells as ppir's overlapped steps) is, item for item
    and with the same placement, ppir's own dualpipev.pps."""
    theirs = load_torch_builtin("DualPipeV", {"P": P, "M": M})
    ours = load_schedule("dualpipev", {"P": P, "M": M})
    assert theirs.placement == ours.placement
    assert theirs.programs == ours.programs
    assert any(isinstance(it, Overlap) for prog in theirs.programs for it in prog)


def test_dualpipev_import_keeps_overlapped_steps(cli):
    code, out, err = cli("import", "torch:DualPipeV", "-D", "P=2", "-D", "M=4")
    assert code == 0 and not err
    assert "OVERLAP_F_B" in out and "placement vshape" in out
    code, out, err = cli("import", "torch:DualPipeV", "-D", "P=2", "-D", "M=3")
    assert code == 2 and "torch rejects DualPipeV(P=2, M=3, v=2): DualPipeV requires" in err


def _torch_actions(path):
    with open(path, newline="") as f:
        return {
            r: [sch._Action.from_str(c) for c in row if c] for r, row in enumerate(csv.reader(f))
        }


def test_reverse_recvs_torch_accepts_ppir_rejects(cli):
    """Recvs posted in the reverse order of the sends (compute_comms CSV): torch's validator,
    its simulator and its CSV loader accept it; ppir reports the FIFO mismatch with a witness
    (golden: tests/golden/torch/reverse_recvs.err)."""
    path = GOLDEN / "reverse_recvs.csv"
    acts = _torch_actions(path)
    assert sch._validate_schedule(acts, 2, 2, 2) == {0: 0, 1: 1}
    no_bookkeeping = {
        r: [a for a in row if a.computation_type != sch.REDUCE_GRAD] for r, row in acts.items()
    }
    sch._simulate_comms_compute(no_bookkeeping, lambda s: s, 2)  # completes: nothing flagged
    rt = sch._PipelineScheduleRuntime([_fake(2, 0)], 2)
    rt._load_csv(str(path), format="compute_comms")
    code, _, err = cli("check", str(path))
    assert code == 1 and "is sent as 0SEND_F0 but received as 1RECV_F1" in err


def test_flattened_groups_deadlock_only_ppir_sees_it():
    """ppir's 1F1B (P=4) lowering with its send/recv groups flattened in posting order deadlocks
    under rendezvous semantics; torch's simulator, which has no rendezvous, accepts it.  The
    torch-csv backend's compute_comms output (groups ordered by a global message key) verifies."""
    low = LowerComms().apply(load_schedule("1f1b", {"P": 4, "M": 8}))
    naive = read_csv_text(write_csv(low, compute_only=False), "<flat>.csv")
    assert [d.kind for d in verify(naive).errors] == ["deadlock"]
    order = {r: [sch._Action.from_str(str(a)) for a in naive.actions(r)] for r in range(4)}
    sch._simulate_comms_compute(order, lambda s: s, 4)
    assert verify(read_csv_text(export_csv(low, "compute_comms"), "<ok>.csv")).ok


def _fake(P, rank, v=1):
    from types import SimpleNamespace

    return SimpleNamespace(
        num_stages=P * v, group_size=P, group_rank=rank, stage_index=0, submod=None
    )


@pytest.mark.parametrize("fmt", ["compute_only", "compute_comms"])
@pytest.mark.parametrize(
    "name,params",
    [
        ("1f1b", {"P": 4, "M": 8}),
        ("interleaved_1f1b", {"P": 4, "M": 8, "v": 2}),
        ("interleaved_vshape", {"P": 2, "M": 4, "v": 2}),
        ("looped_bfs", {"P": 2, "M": 3, "v": 3}),
        ("dualpipev", {"P": 2, "M": 4}),  # overlapped cells, (0F3;3B0)OVERLAP_F_B
    ],
)
def test_export_loads_in_torch(name, params, fmt, tmp_path):
    """torch's _load_csv accepts the exported file, infers ppir's placement and (compute_only)
    lowers it; ppir reads torch's own lowering of it back as a verified schedule."""
    s = LowerComms().apply(load_schedule(name, params))
    path = tmp_path / "s.csv"
    path.write_text(export_csv(s, fmt))
    v = s.stages // s.ranks
    rt = sch._PipelineScheduleRuntime([_fake(s.ranks, 0, v) for _ in range(v)], s.microbatches)
    rt._load_csv(str(path), format=fmt)
    assert tuple(rt.stage_index_to_group_rank[i] for i in range(s.stages)) == s.placement
    lowered = "".join(
        ",".join(map(str, rt.pipeline_order_with_comms[r])) + "\n" for r in range(s.ranks)
    )
    assert verify(read_csv_text(lowered, "<torch-lowered>.csv")).ok
    if fmt == "compute_comms":  # taken verbatim: ppir's order is what runs
        assert lowered == path.read_text()
    overlaps = [a for r in range(s.ranks) for a in rt.pipeline_order_with_comms[r] if a.sub_actions]
    assert len(overlaps) == sum(str(it).endswith("OVERLAP_F_B") for p in s.programs for it in p)


def test_torch_dump_reads_back():
    """torch's own compute_comms dump (with UNSHARD/RESHARD/REDUCE_GRAD) imports and verifies."""
    obj = torch_schedule_object("InterleavedZeroBubble", 2, 4, 2)
    text = "".join(",".join(map(str, obj.pipeline_order_with_comms[r])) + "\n" for r in range(2))
    assert "UNSHARD" in text and "REDUCE_GRAD" in text
    s = read_csv_text(text, "<izb>.csv")
    assert s.is_lowered and verify(s).ok
    assert (
        s.compute_only().programs
        == load_torch_builtin("InterleavedZeroBubble", {"P": 2, "M": 4, "v": 2}).programs
    )


def _deferred_order(name, P, M):
    """torch's compute_comms order of ``name`` built with ``defer_pp_recv=True`` (v = 2), as
    _Actions and as CSV text, UNSHARD/RESHARD/REDUCE_GRAD dropped (torch's simulator has none)."""
    obj = sch.get_schedule_class(name)([_fake(P, 0, 2), _fake(P, 0, 2)], M, defer_pp_recv=True)
    keep = {sch.UNSHARD, sch.RESHARD, sch.REDUCE_GRAD}
    order = {
        r: [a for a in row if a.computation_type not in keep]
        for r, row in obj.pipeline_order_with_comms.items()
    }
    text = "".join(",".join(map(str, order[r])) + "\n" for r in range(P))
    return obj, order, text


@pytest.mark.parametrize(
    "name,P,M,kinds",
    [
        ("Interleaved1F1B", 2, 4, {"deadlock"}),
        ("LoopedBFS", 3, 6, {"deadlock"}),
        ("ZBVZeroBubble", 4, 8, {"payload-mismatch"}),
    ],
)
def test_deferred_recvs_torch_accepts_ppir_rejects(name, P, M, kinds):
    """torch 2.13's ``defer_pp_recv=True`` (``_defer_recv_ops`` in
    torch/distributed/pipelining/schedules.py) moves each RECV to just before its consumer,
    flushing it before a SEND to the same peer only on the lower rank.  torch's simulator
    accepts the result; ppir does not: a higher rank's SEND now precedes a RECV that the lower
    rank's own SEND waits for (a rendezvous deadlock), and on ZB-V a rank receives its peer's
    forwards and backwards in consumption order, not the order they are sent (torch's P2POps
    carry no tag, so FIFO matching would swap them)."""
    obj, order, text = _deferred_order(name, P, M)
    sch._simulate_comms_compute(order, lambda s: obj.stage_index_to_group_rank[s], 2 * P)
    s = read_csv_text(text, f"<torch>/{name}_deferred.csv")
    report = verify(s)
    assert not report.ok and {d.kind for d in report.errors} >= kinds
    if name == "Interleaved1F1B":  # a two-rank cycle: per-peer progress does not break it
        assert [d.kind for d in verify(s, progress="relaxed").errors] == ["deadlock"]
    assert verify(LowerComms().apply(load_torch_builtin(name, {"P": P, "M": M, "v": 2}))).ok


def test_torchs_printed_table_is_named_not_read_as_actions(cli, tmp_path):
    """torch's _format_pipeline_order (what its validator prints, torch 2.13
    torch/distributed/pipelining/schedules.py) lays the order out one step per line, ranks in
    columns; 'ppir import' said "unknown action 'Rank' in row 1".  Now it names the table."""
    obj = torch_schedule_object("Interleaved1F1B", 2, 4, 2)
    f = tmp_path / "table.txt"
    f.write_text(sch._format_pipeline_order(obj.pipeline_order))
    code, out, err = cli("import", str(f))
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith(f"{f}:1:10: error: this is torch's printed table (_format_pipeline")
    f.write_text("".join(line + "\n" for line in f.read_text().splitlines()[1:]))  # no header
    code, _, err = cli("import", str(f))
    assert code == 2 and err.startswith(f"{f}:1:1: error: this is torch's printed table")


@pytest.mark.parametrize(
    "argv",
    [
        ["check"],
        ["viz", "-o", "{tmp}/x.html"],
        ["compile", "--backend", "cost"],
        ["dump"],
        ["import"],
    ],
)
def test_every_command_says_torch_builds_its_1f1b_order_wrong(cli, tmp_path, argv):
    """torch:1F1B fails to verify because torch 2.13 builds its pipeline_order wrong; only
    'ppir import' said so, 'check' and 'viz' printed the out-of-range errors alone."""
    argv = [a.format(tmp=tmp_path) for a in argv]
    code, out, err = cli(argv[0], "torch:1F1B", "-D", "P=2", "-D", "M=4", *argv[1:])
    assert code == 1 and "Traceback" not in err, err
    assert err.count("torch's Schedule1F1B builds its pipeline_order wrong") == 1, err
    code, _, err = cli(argv[0], "torch:GPipe", "-D", "P=2", "-D", "M=4", *argv[1:])
    assert code == 0 and "Schedule1F1B" not in err, err


def test_the_page_quotes_what_torch_says_of_its_own_1f1b_order():
    """docs/torch-interop.md said torch's validator rejects Schedule1F1B's order "without
    giving a location"; torch 2.13 names a rank and a step (a symptom, 3B0 run before any 3F0,
    not the out-of-range 3F8), and "Malformed compute schedule" is _add_send_recv's, torch's
    lowering, not its simulator's.  The page now quotes both as torch prints them."""
    import contextlib
    import io

    obj = torch_schedule_object("1F1B", 4, 8, 1)
    with pytest.raises(AssertionError) as e, contextlib.redirect_stdout(io.StringIO()):
        sch._validate_schedule(obj.pipeline_order, 4, 4, 8)
    first = str(e.value).splitlines()[0]
    with pytest.raises(AssertionError) as e2:
        sch._add_send_recv(
            {r: [a for a in row if a is not None] for r, row in obj.pipeline_order.items()},
            stage_to_rank=lambda s: s,
            num_stages=4,
        )
    doc = " ".join((ROOT / "docs" / "torch-interop.md").read_text().split())
    finding = doc.split("1. **torch 2.13's `Schedule1F1B` order", 1)[1].split("2. Every other", 1)[
        0
    ]
    assert f'"{first}"' in finding, first
    assert f'"{str(e2.value)}"' in finding and "_add_send_recv" in finding
    assert "without giving a location" not in finding
