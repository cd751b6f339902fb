"""``ppir tune``'s reproducing command: every JSON entry's ``command`` and the line under the
table for the first row are a ``ppir compile ... --backend cost`` command line that, run through
the CLI, reports the row's step time and peak memory."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _compiled(cli, command: str) -> tuple[float, float]:
    """(step time, worst rank's peak memory) that ``command`` reports: whole bytes with a
    model or measured sizes, else peak activations in A."""
    argv = shlex.split(command)
    assert argv[:2] == ["ppir", "compile"] and "--backend" in argv, command
    code, out, err = cli(*argv[1:], "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    fp = doc.get("footprint")
    if fp is not None:
        return doc["step_time"], fp["per_rank"][fp["worst_rank"]]["total"]
    return doc["step_time"], max(r["peak_activations"] for r in doc["per_rank"])


def _tune(cli, *argv: str) -> dict:
    code, out, err = cli("tune", *argv, "--format", "json", "-q")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize(
    "argv",
    [
        # a model spec: the row's mbs, tp, dp, recomputation and layer split go into the command
        ("--world", "8", "--tp", "2", "--gpu-memory", "80GiB", "--model", "llama3-8b,seq=4096"),
        # cost flags without a model, passed on as written
        ("-P", "4", "--global-batch", "8", "--cost", "F=2,B=3,I=1.5,W=1.5")
        + ("--comm-latency", "0.25"),
        # a cost file with a [model] table, and a progress model that is not the default
        ("--world", "8", "--config", "examples/cost_config.toml", "--gpu-memory", "80GiB")
        + ("--progress-model", "relaxed"),
    ],
    ids=["model", "cost-flags", "cost-file"],
)
def test_each_rows_command_reports_its_step_time_and_peak(cli, monkeypatch, argv):
    monkeypatch.chdir(ROOT)
    doc = _tune(cli, *argv, "--top", "2")
    rows = doc["ranked"] + doc["slower"][:1]
    assert len(rows) >= 2
    for row in rows:
        step, peak = _compiled(cli, row["command"])
        assert (step, peak) == (row["step_time"], row["peak_memory"]), row["command"]
    for flag in argv[::2]:  # each cost option the run was given reaches the command
        if flag not in ("--world", "--tp", "-P", "--global-batch", "--gpu-memory", "--model"):
            assert flag in shlex.split(rows[0]["command"]), (flag, rows[0]["command"])


def test_text_gives_the_first_rows_command(cli):
    argv = ("--world", "8", "--tp", "2", "--gpu-memory", "80GiB", "--model", "llama3-8b,seq=4096")
    doc = _tune(cli, *argv, "--top", "3")
    code, out, _ = cli("tune", *argv, "--top", "3", "-q")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("ppir compile reports #1's"))
    assert line.endswith(": " + doc["ranked"][0]["command"])
    assert out.count("--backend cost") == 1  # the first row only: the table is not flooded
    cmd = shlex.split(doc["ranked"][0]["command"])
    # the model spec names tp and mbs; dp goes by --dp, as compile takes it
    model = cmd[cmd.index("--model") + 1]
    assert model.startswith("llama3-8b,") and "tp=2" in model and "dp=" not in model
    assert cmd[cmd.index("--dp") + 1] == str(doc["ranked"][0]["dp"])


def test_without_a_model_a_micro_batch_of_b_samples_is_b_times_the_command(cli):
    """Without a model tune's unit is one sample, compile's one micro-batch: the line says so,
    and the command's figures times mbs are the row's."""
    argv = ("-P", "4", "--global-batch", "8", "--micro-batch", "2", "--schedules", "1f1b")
    doc = _tune(cli, *argv)
    row = doc["ranked"][0]
    assert row["mbs"] == 2
    step, peak = _compiled(cli, row["command"])
    assert (2 * step, 2 * peak) == (row["step_time"], row["peak_memory"])
    _, out, _ = cli("tune", *argv, "-q")
    said = "(per micro-batch of 2 samples: 2 x its step time and peak activations are the row's)"
    assert said in out


def test_a_choice_never_expanded_has_no_command(cli):
    """A choice refused before its program was expanded (the batch does not divide) has no
    parameters to give: its command is null; a pruned one was expanded and has one."""
    doc = _tune(cli, "-P", "4", "--global-batch", "6", "--micro-batch", "1,4", "--top", "1")
    unsplit = [r for r in doc["rejected"] if r["rejected"] == "divisibility"]
    assert unsplit and all(r["command"] is None for r in unsplit)
    assert doc["pruned"] and all(r["command"].startswith("ppir compile ") for r in doc["pruned"])


def test_a_built_in_shadowed_by_a_file_here_is_named_by_its_own_file(cli, monkeypatch, tmp_path):
    """tune searches the built-ins whatever the working directory holds, but 'ppir compile
    1f1b' reads a file called 1f1b first: the command named the file, and failed on it."""
    from ppir.schedules import builtin_names

    monkeypatch.chdir(tmp_path)
    for name in builtin_names():
        (tmp_path / name).write_text("not a schedule\n")
    doc = _tune(cli, "-P", "2", "--global-batch", "4", "--top", "2")
    rows = doc["ranked"] + doc["slower"]
    assert len(rows) >= 2
    for row in rows:
        schedule = shlex.split(row["command"])[2]
        assert schedule.endswith(f"{row['schedule']}.pps") and Path(schedule).is_file(), schedule
        assert _compiled(cli, row["command"]) == (row["step_time"], row["peak_memory"])


def test_stage_weights_without_a_model_search_the_one_pipeline_size(cli):
    """Without a model tune searches -P alone, but --stage-weights was refused as if it searched
    every divisor of P ('... tune would search pipeline sizes 1, 2, 4'), whatever the flags."""
    argv = ("-P", "4", "--v", "1", "--global-batch", "8", "--schedules", "1f1b,zb_h1")
    doc = _tune(cli, *argv, "--stage-weights", "1,2,1,2")
    plain = _tune(cli, *argv)
    assert [r["pp"] for r in doc["ranked"]] == [4, 4]
    for row in doc["ranked"]:
        assert _compiled(cli, row["command"]) == (row["step_time"], row["peak_memory"])
        same = next(r for r in plain["ranked"] if r["schedule"] == row["schedule"])
        assert row["step_time"] > same["step_time"]  # the weights were applied
