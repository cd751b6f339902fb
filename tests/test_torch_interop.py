"""``ppir.torch.to_torch_schedule``: torch.distributed.pipelining's runtime running ppir's
verified program (no CSV file), on 2 gloo processes; every stage's gradients match a
single-process full-batch reference to within 1e-5, and ppir's communication order is what
runs."""

from __future__ import annotations

import json
import math
import re

import pytest

CASES = [
    ("1f1b", {"P": 2, "M": 4}),
    ("interleaved_1f1b", {"P": 2, "M": 4, "v": 2}),
    ("interleaved_vshape", {"P": 2, "M": 4, "v": 2}),
    ("zbv", {"P": 2, "M": 3}),
    ("dualpipev", {"P": 2, "M": 4}),  # overlapped steps run as torch's OVERLAP_F_B actions
]

WORKER = r"""
import json, sys
import torch, torch.distributed as dist
from torch import nn
import ppir
from ppir.torch import procgroup, to_torch_schedule

out, cases = sys.argv[1], json.loads(sys.argv[2])
ctx = procgroup.init(device="cpu", timeout_s=60)
torch.set_num_threads(1)
results = []
for name, params in cases:
    s = ppir.lower(ppir.load_schedule(name, params))
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(s.stages)]
    ref = nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(s.stages)])
    ref.load_state_dict(nn.Sequential(*blocks).state_dict())
    x, y = torch.randn(4 * s.microbatches, 8), torch.randn(4 * s.microbatches, 8)
    nn.MSELoss()(ref(x), y).backward()
    mine = list(s.stages_of_rank[ctx.rank])
    sched = to_torch_schedule(s, [blocks[i] for i in mine], s.microbatches, nn.MSELoss())
    order = [str(a) for a in sched.pipeline_order_with_comms[ctx.rank]]
    kw = {}
    if 0 in mine:
        kw["args"] = (x,)
    if s.stages - 1 in mine:
        kw.update(target=y, losses=[])
    sched.step(*kw.pop("args", ()), **kw)
    err = max((p.grad - q.grad).abs().max().item() for i in mine
              for p, q in zip(blocks[i].parameters(), ref[i].parameters()))
    results.append({"case": name, "rank": ctx.rank, "err": err, "order": order})
    dist.barrier()
gathered = [None] * 2
dist.all_gather_object(gathered, results)
if ctx.rank == 0:
    open(out, "w").write(json.dumps(gathered))
dist.barrier()
from ppir.torch.leave import leave
leave(0)  # not finalising: a gloo worker can abort it (ppir.torch.leave)
"""


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_torch_runtime_runs_ppir_program_with_reference_gradients(tmp_path):
    pytest.importorskip("torch")
    from ppir.backends.cuda.launch import start

    import ppir
    from ppir.frontend.csvio import flatten_groups, torch_rows

    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    out = tmp_path / "out.json"
    res = start(("-u", str(script), str(out), json.dumps(CASES)), 2)
    assert res.ok, res.cause
    per_rank = json.loads(out.read_text())
    for k, (name, params) in enumerate(CASES):
        rows = torch_rows(flatten_groups(ppir.lower(ppir.load_schedule(name, params))), False, True)
        for r in range(2):
            got = per_rank[r][k]
            assert got["err"] < 1e-5, got
            assert got["order"] == rows[r], f"{name}: torch runs another order on rank {r}"
            assert (name == "dualpipev") == any(c.endswith(")OVERLAP_F_B") for c in got["order"])


def test_to_torch_schedule_refuses_what_it_cannot_run():
    pytest.importorskip("torch")
    import ppir
    from ppir.torch.interop import lowered_program

    with pytest.raises(ValueError, match="compile \\(or lower\\) it first"):
        lowered_program(ppir.load_schedule("1f1b", {"P": 2, "M": 2}))
    with pytest.raises(TypeError, match="expected a compiled program"):
        lowered_program(3)
    from ppir.torch.interop import to_torch_schedule

    ev = ppir.compile(ppir.load("1f1b", P=1, M=2), passes="forward-only,lower-comms")
    with pytest.raises(ValueError, match="evaluation program .* its schedule's eval"):
        to_torch_schedule(ev, [])


def test_to_torch_schedule_refuses_a_program_that_does_not_verify():
    """docs/torch-interop.md: torch's runtime is loaded with ppir's *verified* program.  A
    compile that failed, or a hand-lowered Schedule that deadlocks, was loaded all the same
    (a plan was verified, these were not): each rank then hung in torch's runtime."""
    pytest.importorskip("torch")
    import ppir
    from ppir.torch.interop import to_torch_schedule

    naive = ppir.compile(ppir.load("1f1b", P=3, M=4), lowering="naive")
    assert not naive.ok
    for program in (naive, naive.program):  # the failed compile, and its program by itself
        with pytest.raises(ppir.PpirError) as e:
            to_torch_schedule(program, [])
        assert e.value.kind == "deadlock" and e.value.exit_code == 1
    from ppir.torch.interop import lowered_program

    good = ppir.lower(ppir.load("1f1b", P=3, M=4))
    assert lowered_program(good) is good


def test_a_compute_order_that_does_not_verify_is_refused_with_its_errors():
    """The documented lines pass ``compiled.program`` to to_torch_schedule.  When the input
    itself fails to verify (torch:1F1B, whose order torch 2.13 builds wrong), compile stops
    before lowering, and that compute-only program was refused with "the schedule has no
    communication: compile (or lower) it first" although it had been compiled: the reason,
    the verifier's errors, was not said."""
    pytest.importorskip("torch")
    import ppir
    from ppir.torch.interop import to_torch_schedule

    compiled = ppir.compile(ppir.load("torch:1F1B", P=2, M=4), overlap=False)
    assert not compiled.ok and not compiled.program.is_lowered
    with pytest.raises(ppir.PpirError) as e:
        to_torch_schedule(compiled.program, [])
    assert e.value.kind == "out-of-range" and e.value.exit_code == 1
    assert "1F4 on rank 1 names microbatch 4" in str(e.value)


def test_the_page_shows_the_script_s_own_lines():
    """docs/torch-interop.md quotes examples/torch_pipelining.py: every line it shows is a line
    of the script (it showed a simplified compile and M = 4 where the script has neither)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    doc = (root / "docs" / "torch-interop.md").read_text()
    section = doc.split("## torch's runtime from Python", 1)[1]
    [block] = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    script = {line.strip() for line in (root / "examples" / "torch_pipelining.py").open()}
    shown = [line.strip() for line in block.splitlines() if line.strip()]
    assert len(shown) >= 5 and [line for line in shown if line not in script] == []


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_documented_script_runs(capfd):
    pytest.importorskip("torch")
    from pathlib import Path

    from ppir.backends.cuda.launch import start

    script = Path(__file__).resolve().parent.parent / "examples" / "torch_pipelining.py"
    res = start((str(script),), 2)
    assert res.ok, res.cause
    out = capfd.readouterr().out
    assert out.count("zbv on torch's runtime") == 2, out
    doc = (Path(__file__).resolve().parent.parent / "docs" / "torch-interop.md").read_text()
    # the two ranks print concurrently, so a line may run into the other's: find each report
    printed = re.findall(r"(rank \d: zbv on torch's runtime, [^:]*: largest \|grad diff\|) "
                         r"(\d\.\de[+-]\d\d)", out)  # fmt: skip
    assert len(printed) == 2, out
    for head, got in printed:  # the documented output, to within a factor of 10
        line = f"{head} {got}"
        shown = re.search(re.escape(head) + r" (\S+)", doc)
        assert shown, f"docs/torch-interop.md does not show {line!r}"
        assert abs(math.log10(float(shown[1]) or 1e-30) - math.log10(float(got) or 1e-30)) < 1, (
            f"docs/torch-interop.md shows {shown[0]!r}; the script printed {line!r}"
        )


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_documented_script_runs_a_torch_csv(capfd, tmp_path):
    """examples/torch_pipelining.py SCHEDULE.csv loaded the CSV with P and M, and a CSV takes
    no parameters: every rank died with a PpirError traceback.  It runs the file's own P and M."""
    pytest.importorskip("torch")
    from pathlib import Path

    from ppir.backends.cuda.launch import start

    import ppir
    from ppir.frontend.csvio import write_csv

    csv = tmp_path / "sched.csv"  # P=2, M=6: not the script's M=4
    csv.write_text(write_csv(ppir.load("interleaved_1f1b", P=2, M=6, v=2)))
    script = Path(__file__).resolve().parent.parent / "examples" / "torch_pipelining.py"
    res = start((str(script), str(csv)), 2)
    assert res.ok, res.cause
    assert capfd.readouterr().out.count("sched.csv on torch's runtime") == 2


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_documented_script_runs_a_csv_torch_dumped_without_warnings(capfd, tmp_path):
    """The page: the script runs "a torch CSV (say one torch's _dump_csv wrote)", whose
    default format is compute_comms.  The script compiled it with overlap=False, which ppir
    ignores for a program that has its communication: each rank printed an
    IgnoredOptionWarning about an option the user never gave."""
    pytest.importorskip("torch")
    from pathlib import Path

    from ppir.backends.cuda.launch import start

    from ppir.frontend.torch_import import torch_schedule_object

    csv = tmp_path / "dumped.csv"
    torch_schedule_object("Interleaved1F1B", 2, 4, 2)._dump_csv(str(csv))  # compute_comms
    assert "SEND_F" in csv.read_text()
    script = Path(__file__).resolve().parent.parent / "examples" / "torch_pipelining.py"
    res = start((str(script), str(csv)), 2)
    assert res.ok, res.cause
    out, err = capfd.readouterr()
    assert out.count("dumped.csv on torch's runtime") == 2, out
    assert "Warning" not in err, err


def test_a_program_for_another_number_of_ranks_is_refused_by_name():
    """to_torch_schedule on a process group of another size: a rank past the program's died
    with 'IndexError: tuple index out of range' and the others with torch's 'AssertionError:
    Schedule has incorrect number of ranks - expected 2, actual 4'.  Now one ValueError."""
    pytest.importorskip("torch")
    import torch.distributed as dist
    from torch import nn

    import ppir
    from ppir.torch.interop import to_torch_schedule

    program = ppir.compile(ppir.load("1f1b", P=2, M=2))
    with pytest.raises(ValueError, match=r"^1f1b runs on 2 ranks, but the process group has 1 "):
        to_torch_schedule(program, [nn.Linear(2, 2)], 2)  # torch.distributed not initialised
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        with pytest.raises(
            ValueError, match=r"^1f1b runs on 2 ranks, but the process group has 1$"
        ):
            to_torch_schedule(program, [nn.Linear(2, 2)], 2)
    finally:
        dist.destroy_process_group()


def test_a_program_of_one_microbatch_says_microbatch_in_the_singular():
    """'the program runs 1 microbatches, not 2'."""
    pytest.importorskip("torch")
    import ppir
    from ppir.torch.interop import to_torch_schedule

    program = ppir.compile(ppir.load("1f1b", P=1, M=1))
    with pytest.raises(ValueError, match=r"^the program runs 1 microbatch, not 2$"):
        to_torch_schedule(program, [None], 2)
