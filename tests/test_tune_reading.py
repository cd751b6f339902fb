"""ppir tune says what it read and prints its figures as ppir compile prints them (new-user
trials: a budget in decimal gigabytes, peak memory in another format than compile's, DualPipe's
M, rejected rows called launchable, an empty table, pipeline sizes a cost file cannot time)."""

from __future__ import annotations

from ppir.analysis.units import fmt_memory

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
