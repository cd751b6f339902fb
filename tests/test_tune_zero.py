"""``ppir tune --zero auto``: a choice with data-parallel replicas that does not fit at zero=0
is counted at zero=1 (the distributed optimizer), which changes its memory and not its step
time; each row says its stage, and its command reproduces it."""

from __future__ import annotations

import json
import shlex

import pytest

pytestmark = pytest.mark.usefixtures("cli")

ARGV = ("--world", "16", "--tp", "2", "--gpu-memory", "32GiB", "--model", "llama3-8b,seq=4096")
BUDGET = 32 * 2**30 * 0.9  # --gpu-memory less the default 10 % reserve


def _tune(cli, *argv: str) -> dict:
    code, out, err = cli("tune", *argv, "--format", "json", "-q")
    assert code == 0, err
    return json.loads(out)


def _compiled(cli, command: str) -> tuple[float, float]:
    code, out, err = cli(*shlex.split(command)[1:], "--format", "json")
    assert code == 0, err
    fp = json.loads(out)["footprint"]
    return json.loads(out)["step_time"], fp["per_rank"][fp["worst_rank"]]["total"]


def _key(row) -> tuple:
    return tuple(row[k] for k in ("pp", "dp", "schedule", "v", "mbs", "recompute")) + (
        tuple(row["stage_layers"] or ()),
    )


def test_each_row_takes_zero_1_only_where_zero_0_does_not_fit(cli):
    doc = _tune(cli, *ARGV, "--top", "6", "--zero", "auto")
    rows = doc["ranked"]
    assert {r["zero"] for r in rows} == {0, 1} or {r["zero"] for r in rows} == {1}, rows
    for row in rows:
        assert row["peak_memory"] <= BUDGET
        step, peak = _compiled(cli, row["command"])
        assert (step, peak) == (row["step_time"], row["peak_memory"]), row["command"]
        if row["zero"] == 1:
            assert row["dp"] > 1 and ",zero=1" in row["command"]
            at_zero_0 = row["command"].replace(",zero=1", "")
            step0, peak0 = _compiled(cli, at_zero_0)
            assert step0 == step and peak0 > BUDGET, (peak0, BUDGET)  # the least that fits
        else:
            assert "zero=" not in row["command"]


def test_searching_zero_ranks_more_choices_and_leaves_their_step_times(cli):
    every = ("--schedules", "1f1b,interleaved_1f1b,zb_h1", "--micro-batch", "1,2")
    every += ("--recompute", "none,full", "--top", "1000")  # all compiled, none pruned
    plain = _tune(cli, *ARGV, *every)
    auto = _tune(cli, *ARGV, *every, "--zero", "auto")
    assert not plain["pruned"] and not auto["pruned"]
    before = {_key(r): r for r in plain["ranked"]}
    after = {_key(r): r for r in auto["ranked"]}
    assert set(before) < set(after)  # what fitted still fits, and more do
    for k, r in before.items():
        assert after[k]["step_time"] == r["step_time"] and after[k]["zero"] == 0
    gained = [after[k] for k in set(after) - set(before)]
    assert gained and all(r["zero"] == 1 for r in gained)
    rejected = {_key(r) for r in plain["rejected"] if r["rejected"] == "memory"}
    assert {_key(r) for r in gained} <= rejected


def test_the_text_shows_each_rows_stage_and_no_longer_suggests_zero(cli):
    code, out, err = cli("tune", *ARGV, "--top", "3", "--zero", "auto", "-q")
    assert code == 0, err
    head = out.splitlines()[1].split()
    assert head[head.index("recompute") + 1] == "zero"
    assert "zero=1 in --model" not in out
    code, out, err = cli("tune", *ARGV, "--top", "3", "-q")
    assert code == 0 and "--zero auto counts them at zero=1 (the distributed optimizer)" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (("-P", "4", "--zero", "auto"), "--zero auto needs --model"),
        (ARGV[:4] + ARGV[6:] + ("--zero", "auto"), "give --gpu-memory (or --memory-budget)"),
    ],
    ids=["no-model", "no-budget"],
)
def test_zero_auto_without_what_it_needs_is_a_usage_error(cli, argv, message):
    code, out, err = cli("tune", *argv, "-q")
    assert code == 2 and message in err and "Traceback" not in err, err


def test_a_pruned_choice_whose_memory_was_not_checked_has_no_zero(cli):
    """Pruned before its memory was checked, a choice with replicas may need zero=1 as well as
    not: its zero is null (a pruned one checked against its lower bound says the stage it was
    counted at, and one without replicas cannot shard: the model's)."""
    doc = _tune(cli, *ARGV, "--top", "3", "--zero", "auto")
    unchecked = [r for r in doc["pruned"] if r["peak_memory"] is None]
    assert any(r["dp"] > 1 for r in unchecked) and any(r["dp"] == 1 for r in unchecked)
    for r in unchecked:
        assert r["zero"] == (None if r["dp"] > 1 else 0), r
    checked = [r for r in doc["pruned"] if r["peak_memory"] is not None]
    assert checked and all(r["zero"] in (0, 1) for r in checked)
    plain = _tune(cli, *ARGV, "--top", "3")  # not searched: every row at the model's zero=0
    assert {r["zero"] for r in plain["pruned"]} == {0}


@pytest.mark.parametrize("zero", ["", ",zero=1"])
def test_when_nothing_fits_at_zero_1_the_hint_names_zero_2(cli, zero):
    """--zero auto counted the choices with replicas at zero=1: what is left to try is zero=2,
    as for a model given at zero=1."""
    argv = ("--world", "16", "--tp", "2", "--gpu-memory", "8GiB", "--model")
    code, out, err = cli("tune", *argv, f"llama3-8b,seq=4096{zero}", "--zero", "auto", "-q")
    assert code == 1, err
    assert "(no feasible choice)" in out and "try zero=2 in --model" in out, out
    assert "zero=1 in --model" not in out
