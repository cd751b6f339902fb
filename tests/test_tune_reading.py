"""ppir tune says what it read and prints its figures as ppir compile prints them (new-user
trials: a budget in decimal gigabytes, peak memory in another format than compile's, DualPipe's
M, rejected rows called launchable, an empty table, pipeline sizes a cost file cannot time)."""

from __future__ import annotations

import json

import pytest

from ppir.analysis.units import decimal_reading, fmt_memory

TUNE_8B = ["tune", "-P", "4", "--model", "llama3-8b", "-q"]


def _rows(out: str) -> list[list[str]]:
    """The ranked table's rows, split on its two-space column gaps."""
    return [
        [cell.strip() for cell in line.split("  ") if cell.strip()]
        for line in out.splitlines()
        if line[:3].strip().isdigit()
    ]


def test_the_peak_memory_column_reads_as_compile_prints_it(cli):
    """was: '41 GiB' in tune's 'peak mem' where 'ppir compile --backend cost' said '41.00 GiB'
    for the same program."""
    argv = [*TUNE_8B, "--gpu-memory", "80GiB", "--schedules", "interleaved_1f1b", "--v", "2"]
    code, out, err = cli(*argv, "--recompute", "full", "--micro-batch", "1")
    assert code == 0, err
    row = next(r for r in _rows(out) if "4x5,5x2,2" in r)
    code, text, err = cli(
        "compile", "interleaved_1f1b", "-D", "P=4", "-D", "M=16", "-D", "v=2", "--backend",
        "cost", "--model", "llama3-8b", "--recompute", "full", "--stage-layers", "4x5,5x2,2",
    )  # fmt: skip
    assert code == 0, err
    (peak,) = [line for line in text.splitlines() if line.startswith("* peak: ")]
    compiled = peak.split(", ")[1]
    assert compiled == "41.00 GiB" and compiled in row, (row, peak)
    assert fmt_memory(41 * 2**30) == "41.00 GiB" and fmt_memory(1.5 * 2**20) == "1.50 MiB"


@pytest.mark.parametrize(
    "budget, said, read",
    [
        (["--gpu-memory", "80GB"],
         "budget 67.06 GiB per GPU (--gpu-memory 80GB: 80 decimal gigabytes, 80 x 10^9 bytes "
         "= 74.51 GiB, less the 10% reserve; for 80 x 2^30 bytes write 80GiB); assuming",
         80 * 10**9),
        (["--gpu-memory", "80gb", "--reserve", "0"],
         "budget 74.51 GiB per GPU (--gpu-memory 80gb: 80 decimal gigabytes, 80 x 10^9 bytes "
         "= 74.51 GiB; for 80 x 2^30 bytes write 80GiB); assuming",
         80 * 10**9),
        (["--memory-budget", "60GB"],
         "budget 55.88 GiB per GPU (--memory-budget 60GB: 60 decimal gigabytes, 60 x 10^9 "
         "bytes = 55.88 GiB; for 60 x 2^30 bytes write 60GiB); assuming",
         None),
        (["--gpu-memory", "80GiB"], "budget 72.00 GiB per GPU; assuming", 80 * 2**30),
    ],
)  # fmt: skip
def test_a_budget_in_decimal_gigabytes_is_said_as_read(cli, budget, said, read):
    """was: '--gpu-memory 80GB' read as 80 x 10^9 bytes (74.5 GiB, not the 80 GiB of an
    '80 GB' GPU) and the header said only 'budget 67.0552 GiB per GPU'."""
    argv = [*TUNE_8B, "--schedules", "1f1b", "--top", "1", *budget]
    code, out, err = cli(*argv)
    assert code == 0, err
    assert said in out.splitlines()[0]
    code, out, err = cli(*argv, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["gpu_memory"] == read  # the bytes --gpu-memory was read as


def test_a_decimal_unit_is_read_and_said_in_one_place():
    assert decimal_reading("1.5TB") == (
        "1.5 decimal terabytes, 1.5 x 10^12 bytes = 1396.98 GiB",
        "for 1.5 x 2^40 bytes write 1.5TiB",
    )
    assert decimal_reading(" 512 mb")[0] == "512 decimal megabytes, 512 x 10^6 bytes = 488.28 MiB"
    assert [decimal_reading(t) for t in ("80GiB", "6A", "80", "xGB", None)] == [None] * 5


NOTHING_FITS = ["tune", "--world", "4", "--model", "llama3-8b,seq=1024", "--schedules"]
NOTHING_FITS += ["dualpipe,v_half,1f1b", "-q", "--gpu-memory", "40GiB"]


def test_a_rejected_choice_is_not_called_launchable(cli):
    """was: '"launchable": true' on 1f1b rows rejected for memory (and null on ones rejected
    before they were expanded), as if ppir launch could run what tune had just refused."""
    code, out, err = cli(*NOTHING_FITS, "--format", "json")
    assert code == 1, err
    rejected = json.loads(out)["rejected"]
    assert {r["rejected"] for r in rejected} == {"memory", "constraint"}
    assert [r for r in rejected if r["launchable"] is not False] == []
    code, out, err = cli(*NOTHING_FITS, "--gpu-memory", "80GiB", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    kept = {(r["schedule"], r["launchable"]) for part in ("ranked", "slower", "pruned")
            for r in doc[part]}  # fmt: skip
    # pruned rows were not compiled: not known to run (null), but dualpipe's two pipelines
    assert kept == {("1f1b", True), ("v_half", True), ("1f1b", None), ("v_half", None)} | {
        ("dualpipe", False)
    }


def test_a_pruned_choice_is_not_called_launchable(cli):
    """was: '"launchable": true' on every pruned row, which tune never compiled (not verified,
    its memory perhaps never checked); now null there, false where the runtime cannot run the
    schedule, and 'runtime_limit' says why apart from whether the choice fits."""
    code, out, err = cli(*NOTHING_FITS, "--gpu-memory", "80GiB", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["pruned"] and all(r["step_time"] is None for r in doc["pruned"])
    for r in doc["pruned"]:
        two = r["schedule"] == "dualpipe"
        assert r["launchable"] is (False if two else None), r
        assert (r["runtime_limit"] or "").startswith("dualpipe runs 2 pipelines") is two, r
    assert all(r["launchable"] is True and r["runtime_limit"] is None for r in doc["ranked"])
    memory = [r for r in doc["rejected"] if r["rejected"] == "memory"]
    assert memory and all(r["launchable"] is False for r in memory)


def test_when_nothing_fits_no_empty_table_is_printed(cli):
    """was: the table's header line over no rows, then '(no feasible choice): ...'."""
    code, out, err = cli(*NOTHING_FITS)
    assert code == 1, err
    lines = out.splitlines()
    assert lines[0].startswith("world 4 (tp 1), global batch 16, budget 36.00 GiB per GPU;")
    assert lines[1].startswith("(no feasible choice): every choice that fits the other ")
    assert "bubble/total" not in out and lines[3].startswith(
        "rejected (84: 72 memory, 12 constraint)"
    )


def test_dualpipes_m_says_how_its_pipelines_share_it_as_compile_counts_them(cli):
    """was: tune's M column said 16 for bidirectional DualPipe, where ppir compile -D M=16
    said '8 microbatches' (one pipeline's) with nothing to tell the two apart; now both say 16
    and how the pipelines share it."""
    # 120 GiB: under full recomputation DualPipe's W holds what it needs from I on (86 GiB)
    argv = [*TUNE_8B, "--tp", "2", "--gpu-memory", "120GiB", "--schedules", "dualpipe,1f1b"]
    code, out, err = cli(*argv, "--recompute", "full", "--micro-batch", "1", "--even")
    assert code == 0, err
    m = {r[3]: r[6] for r in _rows(out)}
    assert m == {"dualpipe*": "16 (2x8)", "1f1b": "16"}
    assert (
        "M (k x m): dualpipe runs its M microbatches in 2 pipelines of m each, as ppir compile "
        "-D M=M reports them ('M microbatches (m per pipeline)')"
    ) in out.splitlines()
    code, text, err = cli("compile", "dualpipe", "-D", "P=4", "-D", "M=16", "--backend", "cost")
    assert code == 0, err
    assert text.splitlines()[0] == (
        "dualpipe(P=4, M=16): 4 ranks, 8 stages in 2 pipelines, 16 microbatches (8 per pipeline)"
    )
    code, out, err = cli(*argv, "--recompute", "full", "--micro-batch", "1", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    per = {(r["schedule"], r["microbatches"], r["microbatches_per_pipeline"])
           for part in ("ranked", "slower", "pruned") for r in doc[part]}  # fmt: skip
    assert per == {("dualpipe", 16, 8), ("1f1b", 16, 16)}


def test_gpu_memory_is_read_once(cli, monkeypatch):
    """--gpu-memory's text was read twice: for the budget, then again for the JSON's
    `gpu_memory` (a second reading that could drift from the first).  The budget's reading
    now gives both."""
    from ppir.cli import tune_budget

    read, real_parse = [], tune_budget.parse_budget

    def parse_budget(text, *rest):
        read.append(text)
        return real_parse(text, *rest)

    monkeypatch.setattr(tune_budget, "parse_budget", parse_budget)
    argv = [*TUNE_8B, "--schedules", "1f1b", "--top", "1", "--gpu-memory", "80GB"]
    code, out, err = cli(*argv, "--reserve", "8GiB", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["gpu_memory"], doc["budget"]) == (80 * 10**9, 80 * 10**9 - 8 * 2**30)
    assert read == ["80GB", "8GiB"]  # --gpu-memory, then --reserve: each once


def test_a_fixed_program_of_two_pipelines_is_not_told_to_take_an_m(cli, tmp_path):
    """A JSON program takes no -D M: the note on its M column named 'ppir compile -D M=M'
    for a file whose microbatches are fixed (dualpipe P=2 M=4 written out)."""
    import ppir

    path = tmp_path / "dp.json"
    path.write_text(json.dumps(ppir.to_json(ppir.load("dualpipe", P=2, M=4))))
    code, out, err = cli("tune", "-P", "2", "--schedules", str(path), "--global-batch", "4")
    assert code == 0, err
    assert (
        f"M (k x m): {path} runs its M microbatches in 2 pipelines of m each, as ppir compile "
        "reports them ('M microbatches (m per pipeline)')"
    ) in out.splitlines()
    code, text, err = cli("compile", str(path), "--backend", "cost")
    assert code == 0 and "4 microbatches (2 per pipeline)" in text.splitlines()[0], err


def test_when_nothing_fits_zero_is_suggested_only_where_there_are_replicas_to_shard(cli):
    """With one replica (world 8 = tp 8) the hint said 'try zero=1', then with zero=1 'try
    zero=2': ZeRO shards over data-parallel replicas and had nothing to shard."""
    argv = ["tune", "--tp", "8", "--gpu-memory", "16GiB", "-q"]
    code, out, _ = cli(*argv, "--world", "8", "--model", "llama3-70b,seq=4096")
    assert code == 1 and "zero=" not in out and "try more GPUs (--world) or a larger" in out
    code, out, _ = cli(*argv, "--world", "64", "--model", "llama3-70b,seq=4096")
    assert code == 1 and "try zero=1 in --model (the distributed optimizer)" in out


def test_a_note_says_zero_would_shard_the_replicas_rejected_for_memory(cli):
    """tune keeps --model's zero (0 by default) and does not search it, so a Megatron user with
    the distributed optimizer saw choices with data-parallel replicas rejected for memory and
    no word of ZeRO (the hint came only when nothing fitted): at world 64, tp 8, 80GiB, zero=1
    lets more choices fit and ranks a faster one first."""
    argv = ["tune", "--world", "64", "--tp", "8", "--gpu-memory", "80GiB", "-q"]
    argv += ["--schedules", "1f1b,interleaved_1f1b", "--even"]
    code, out, err = cli(*argv, "--model", "llama3-70b,seq=4096")
    assert code == 0, err
    note = [line for line in out.splitlines() if line.startswith("note: ")]
    assert len(note) == 1 and "exceed the memory budget without ZeRO" in note[0], out
    n = int(note[0].split()[1])
    rejected = [c for c in out.splitlines() if c.startswith("    pp=") and "dp=1 " not in c]
    assert n > 0 and rejected, out
    code, out, err = cli(*argv, "--model", "llama3-70b,seq=4096,zero=1")
    assert code == 0 and "without ZeRO" not in out, err
    # one replica (world = tp x pp): nothing for ZeRO to shard, no note
    one = [*argv[:1], "--world", "32", "--pp", "4", *argv[3:]]
    code, out, err = cli(*one, "--model", "llama3-70b,seq=4096")
    assert " 4   1 " in out and "without ZeRO" not in out, err
