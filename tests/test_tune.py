"""ppir tune: ranking and the reason for every rejected choice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ppir.analysis.config import CostConfig, make_config
from ppir.analysis.tune import tune
from ppir.analysis.units import parse_budget
from ppir.cli.main import build_parser
from ppir.diagnostics import PpirError


def test_ranked_by_step_time_with_memory_and_constraint_rejections():
    c = tune(
        ["1f1b", "gpipe", "interleaved_1f1b"],
        4,
        12,
        [1, 2, 5],
        [1, 2],
        CostConfig(),
        budget=(5, "A"),
    )
    ok = [x for x in c if x.ok]
    assert ok and [x.step_time for x in ok] == sorted(x.step_time for x in ok)
    why = {(x.schedule, x.v, x.mbs): x.why for x in c if not x.ok}
    assert why[("gpipe", 1, 1)] == "memory"  # 12 A > 5 A
    assert why[("interleaved_1f1b", 2, 2)] == "constraint"  # M = 6 leaves a last group of 2 < P
    assert why[("1f1b", 1, 5)] == "divisibility"  # 12 % 5


def test_without_a_model_memory_is_per_sample_as_the_times_are():
    """GPipe holds every sample of the step whatever the micro-batch size: 32 samples' worth
    at mbs 1, 2, 4 and 8.  The peak stayed in A of one micro-batch while the times were per
    sample, so mbs=8 fitted a budget of 6 A at '4 A' and mbs=1 was rejected at 32 A."""
    c = tune(["gpipe", "1f1b"], 4, 32, [1, 2, 4, 8], [1], CostConfig(), budget=(6, "A"))
    peaks = {(x.schedule, x.mbs): x.peak for x in c}
    assert {peaks["gpipe", b] for b in (1, 2, 4, 8)} == {32.0}
    assert all(x.why == "memory" for x in c if x.schedule == "gpipe")
    # 1F1B holds P microbatches on its first rank: 4 x mbs samples
    assert [peaks["1f1b", b] for b in (1, 2, 4, 8)] == [4.0, 8.0, 16.0, 32.0]
    assert [x.mbs for x in c if x.ok] == [1]  # the one that fits 6 A
    # a single micro-batch size of 1 reads as before: A of one microbatch = one sample's
    (one,) = [x for x in tune(["1f1b"], 4, 8, [1], [1], CostConfig()) if x.ok]
    assert one.peak == 4.0


def test_constraint_reason_quotes_the_require_message():
    c = tune(["interleaved_1f1b"], 4, 6, [1], [2], CostConfig())
    assert not c[0].ok and "the last group" in c[0].reason


def test_layers_divisibility_with_a_model():
    cfg = make_config({"model": {"preset": "gpt2-xl"}})  # 48 layers
    c = tune(["interleaved_1f1b"], 4, 8, [1], [2, 5], cfg)
    assert [x.why for x in c] == ["", "divisibility"]


def test_stages_the_layers_cannot_fill_are_refused_before_any_expansion(monkeypatch):
    """--pp 64 for a 32-layer model expanded every schedule at P=64 (35 s of a 46 s query) to
    find that 32 layers cannot fill 64 stages: the declarations say so without a program."""
    import ppir.analysis.tune as tune_module

    loads = []
    real = tune_module.load_for_batch
    monkeypatch.setattr(
        tune_module, "load_for_batch", lambda name, *a: loads.append(str(name)) or real(name, *a)
    )
    cfg = make_config({"model": {"preset": "gpt2-xl"}})  # 48 layers
    c = tune(["1f1b", "interleaved_1f1b", "zbv"], 64, 64, [1], [1, 2], cfg)
    assert {x.why for x in c} == {"divisibility"} and loads == []
    assert {x.reason for x in c} == {
        "48 layers cannot fill 64 stages: a stage would hold no layer",
        "48 layers cannot fill 128 stages: a stage would hold no layer",
    }
    c = tune(["1f1b", "zbv"], 16, 16, [1], [1], cfg)  # 16 and 32 stages of 48 layers
    assert [x.ok for x in c] == [True, False] and loads == ["1f1b"]  # zbv: 48 % 32
    assert c[1].reason == "48 layers do not split evenly into 32 stages"


def test_budget_parsing():
    assert parse_budget("6A", False) == (6.0, "A")
    assert parse_budget("2GiB", True) == (2 * 2**30, "bytes")
    # plain bytes, as a script computes them (refused as "expected a size in bytes")
    assert parse_budget("52566458368B", True) == (52566458368, "bytes")
    with pytest.raises(PpirError) as e:  # a bare count of bytes: the hint said ...368GiB
        parse_budget("52566458368", True, "--gpu-memory")
    assert e.value.diagnostics[0].hints == ("a size needs its unit: 52566458368B for bytes",)
    with pytest.raises(PpirError) as e:  # 80B: 80 bytes, no GPU's memory
        parse_budget("80B", True, "--gpu-memory")
    assert e.value.message == "--gpu-memory 80B: 80 bytes is less than a MiB"


def test_tune_cli(cli):
    code, out, err = cli(
        "tune",
        "-P",
        "4",
        "--global-batch",
        "8",
        "--memory-budget",
        "5A",
        "--schedules",
        "1f1b,gpipe",
    )
    assert code == 0, err
    assert "1f1b" in out and "rejected (1: 1 memory)" in out
    assert "memory (1), the 1 closest to the budget:" in out and "gpipe v=1 mbs=1 M=8: peak" in out
    code, out, _ = cli("tune", "-P", "4", "--global-batch", "8", "--memory-budget", "5A",
                       "--schedules", "1f1b,gpipe", "--all-rejected")  # fmt: skip
    assert code == 0 and "  gpipe v=1 mbs=1 M=8: memory: peak activations" in out
    code, out, _ = cli("tune", "-P", "2", "--global-batch", "4", "--format", "json")
    doc = json.loads(out)
    assert doc["format"] == "ppir.tune/2" and doc["ranked"][0]["rank"] == 1
    code, _, err = cli("tune", "-P", "2", "--global-batch", "4", "--memory-budget", "3GB")
    assert code == 2 and "needs memory sizes: --model" in err


def test_tune_text_summarises_the_rejected_choices(cli):
    argv = ["tune", "--world", "4", "--model", "llama3-8b,seq=1024", "--gpu-memory", "40GiB"]
    argv += ["--schedules", "dualpipe,v_half,1f1b", "-q"]
    code, out, err = cli(*argv)
    assert code == 1, err  # nothing fits: a script can tell, and the text says what to change
    assert "(no feasible choice): every choice that fits the other constraints exceeds" in out
    doc = json.loads(cli(*argv, "--format", "json")[1])
    memory = sorted((c for c in doc["rejected"] if c["rejected"] == "memory"),
                    key=lambda c: c["peak_memory"])  # fmt: skip
    constraint = [c for c in doc["rejected"] if c["rejected"] == "constraint"]
    n = len(doc["rejected"])
    assert f"rejected ({n}: {len(memory)} memory, {len(constraint)} constraint):" in out
    shown = [line for line in out.splitlines() if line.startswith("    pp=")]
    assert len(shown) == 5 and len(memory) > 5  # the five closest to the budget, closest first
    assert shown[0].endswith(memory[0]["reason"]) and shown[4].endswith(memory[4]["reason"])
    dual = sum(c["schedule"] == "dualpipe" for c in constraint)
    assert f"    dualpipe: {constraint[0]['reason']} ({dual} choices)" in out
    full = cli(*argv, "--all-rejected")[1]
    assert sum(": memory: " in line for line in full.splitlines()) == len(memory)


def test_a_reason_is_listed_once_with_the_schedules_it_rejected(cli):
    """was: one line per schedule and reason, so a batch that no dp x micro-batch splits
    repeated 'global batch 32 does not split into dp=8 x micro-batch 3' for each of the 13
    built-ins at each dp (52 lines), and v_half and v_min each had their own copy of 'a V
    placement needs at least two ranks'."""
    argv = ["tune", "--world", "8", "--model", "llama3-8b", "--gpu-memory", "80GiB", "-q"]
    code, out, err = cli(*argv, "--micro-batch", "3")
    assert code == 1, err
    listed = [line for line in out.splitlines() if line.startswith("    ")]
    assert listed == [
        f"    every schedule: global batch 32 does not split into dp={dp} x micro-batch 3 "
        f"({n} choices)"
        for dp, n in ((8, 63), (4, 87), (2, 75), (1, 63))
    ]
    code, out, err = cli(*argv, "--schedules", "v_half,v_min,1f1b", "--top", "1")
    assert code == 0, err
    assert (
        "    v_half, v_min: requirement failed: a V placement needs at least two ranks (with P = "
        "1) (12 choices)" in out.splitlines()
    )


def test_choices_ppir_launch_cannot_run_are_marked(cli):
    """Bidirectional DualPipe (two pipelines) ranks first under the textbook costs, but the
    executor runs one pipeline: the table marks it and says why; JSON says launchable."""
    code, out, _ = cli("tune", "-P", "2", "--schedules", "dualpipe,1f1b")
    assert code == 0
    rows = {line.split()[3]: line for line in out.splitlines() if line[:3].strip().isdigit()}
    assert set(rows) == {"dualpipe*", "1f1b"}
    assert "* ppir launch cannot run it: dualpipe runs 2 pipelines" in out
    code, out, _ = cli("tune", "-P", "2", "--schedules", "dualpipe,1f1b", "--format", "json")
    ranked = {r["schedule"]: r["launchable"] for r in json.loads(out)["ranked"]}
    assert ranked == {"dualpipe": False, "1f1b": True}


def test_model_fields_tune_searches_are_refused_not_replaced(cli):
    base = ["tune", "--world", "8", "--gpu-memory", "80GiB", "-q"]
    code, _, err = cli(*base, "--model", "llama3-8b,mbs=4")
    assert code == 2 and "the model's mbs=4: tune searches mbs itself (--micro-batch)" in err
    code, _, err = cli(*base, "--model", "llama3-8b,dp=4")
    assert code == 2 and "the model's dp=4: tune searches dp itself" in err
    code, _, err = cli(*base, "--model", "llama3-8b,tp=4", "--tp", "2")
    assert code == 2 and "--tp 2 and the model's tp=4 disagree" in err


def test_json_bytes_are_whole_and_equal_times_rank_the_smaller_memory_first(cli):
    code, out, err = cli(
        "tune", "--world", "8", "--tp", "8", "--model", "llama3-8b", "--format", "json", "-q"
    )
    assert code == 0, err
    doc = json.loads(out)
    ranked = doc["ranked"]
    assert all(isinstance(r["peak_memory"], int) for r in ranked)
    assert all(r["peak_memory"] == r["memory"]["total"] for r in ranked)
    assert all(r["rejected"] is None for r in doc["pruned"] + ranked)  # not rejected
    keys = [(round(r["step_time"], 9), r["peak_memory"]) for r in ranked]
    assert keys == sorted(keys) and len({k[0] for k in keys}) < len(keys)  # ties, broken


@pytest.mark.parametrize(
    "budget, expected",
    [
        (["--gpu-memory", "24GiB"], 23192823398),  # 90 % of it: 23192823398.4 bytes
        (["--gpu-memory", "80GiB", "--reserve", "0"], 80 * 2**30),
        (["--memory-budget", "0.1KiB"], 102),  # 102.4
    ],
)
def test_the_json_budget_is_whole_bytes(cli, budget, expected):
    """was: '"budget": 23192823398.4' for --gpu-memory 24GiB, where every other byte count of
    the document is an integer."""
    argv = ["tune", "--world", "8", "--tp", "8", "--model", "llama3-8b", "--format", "json", "-q"]
    code, out, err = cli(*argv, "--schedules", "1f1b", *budget)
    assert code in (0, 1), err  # 1: nothing fits 102 bytes
    doc = json.loads(out)
    assert doc["memory_unit"] == "bytes" and doc["budget"] == expected
    assert isinstance(doc["budget"], int)


def test_every_tune_json_key_is_documented(cli, capsys):
    """Every key of a ppir.tune/2 document (top level and per choice) is named in the tune
    section of docs/cost-model.md, and --help states the default --v grid."""
    argv = ["tune", "--world", "16", "--tp", "8", "--model", "llama3-8b,seq=1024", "-q"]
    argv += ["--gpu-memory", "80GiB", "--schedules", "1f1b,gpipe", "--format", "json"]
    code, out, err = cli(*argv)
    assert code == 0, err
    doc = json.loads(out)
    keys = set(doc) | {k for part in ("ranked", "slower", "pruned", "rejected")
                       for c in doc[part] for k in c}  # fmt: skip
    text = (Path(__file__).parents[1] / "docs" / "cost-model.md").read_text()
    section = text[text.index("## Searching the choices") : text.index("## Measured costs")]
    assert sorted(k for k in keys if f"`{k}`" not in section and f"`{k}[]`" not in section) == []
    with pytest.raises(SystemExit):
        build_parser().parse_args(["tune", "--help"])
    assert (
        "(default 1,2,4 and, with --model, every v that splits a rank's layers evenly into v "
        "chunks)" in " ".join(capsys.readouterr().out.split())
    )


def test_the_default_v_grid_adds_each_v_that_splits_a_ranks_layers_evenly():
    """Without --v: 1, 2, 4, and with a model every v with layers % (P x v) == 0 (Megatron-LM's
    condition for its virtual pipeline size), so 80 layers on P = 4 try v = 5, 10 and 20 too."""
    from ppir.analysis.tune_space import Space

    assert Space(world=32).vs_for(4, 80) == (1, 2, 4, 5, 10, 20)
    assert Space(world=32).vs_for(8, 80) == (1, 2, 4, 5, 10)
    assert Space(world=32).vs_for(3, 80) == (1, 2, 4)  # 80 / 3 is not whole: nothing to add
    assert Space(world=32).vs_for(1, 80) == (1, 2, 4)  # one rank: no pipeline to interleave
    assert Space(world=32).vs_for(4, None) == (1, 2, 4)  # no model, no layers
    assert Space(world=32, vs=(3,)).vs_for(4, 80) == (3,)  # --v as given


def test_tune_finds_an_interleaving_beyond_the_fixed_grid(cli):
    argv = ["tune", "--world", "64", "--tp", "8", "--gpu-memory", "80GiB", "-q", "--format", "json"]
    argv += ["--model", "llama3-70b,seq=4096", "--schedules", "interleaved_1f1b"]
    code, out, err = cli(*argv)
    assert code == 0, err
    best = json.loads(out)["ranked"][0]
    assert best["v"] > 4 and 80 % (best["pp"] * best["v"]) == 0, best
    code, out, err = cli(*argv, "--v", "1,2,4")
    assert json.loads(out)["ranked"][0]["step_time"] > best["step_time"]


def test_when_nothing_fits_the_hint_suggests_only_what_was_not_tried(cli):
    """was: 'try zero=1 in --model ..., or --recompute full' whatever the search had tried,
    so a model already at zero=1 (or 2) searched with full recomputation was told to try both."""
    argv = ["tune", "--world", "16", "--tp", "8", "--gpu-memory", "10GiB", "-q"]
    code, out, err = cli(*argv, "--model", "llama3-70b,zero=2")
    assert code == 1, err
    assert "try more GPUs (--world) or a larger --gpu-memory\n" in out
    code, out, err = cli(*argv, "--model", "llama3-70b,zero=1", "--recompute", "none")
    assert code == 1, err
    want = (
        "try zero=2 in --model (gradients sharded too; memory only: its reductions per "
        "microbatch under pipelining are not timed), more GPUs (--world), a larger "
    )
    assert want + "--gpu-memory, or --recompute full\n" in out
    code, out, err = cli(*argv, "--model", "llama3-70b", "--micro-batch", "2")
    assert code == 1, err
    want = "try zero=1 in --model (the distributed optimizer), more GPUs (--world), a larger "
    assert want + "--gpu-memory, or --micro-batch 1\n" in out


def test_the_header_leaves_the_micro_batch_size_to_the_rows(cli):
    """With a model tune searches mbs, so the header's 'b=1' (the model's default) contradicted
    rows ranked at mbs 2 (found in a new-user trial)."""
    argv = ["tune", "--world", "16", "--tp", "8", "--gpu-memory", "80GiB"]
    argv += ["--model", "llama3-8b", "--schedules", "1f1b", "--micro-batch", "1,2", "--even", "-q"]
    code, out, err = cli(*argv)
    assert code == 0, err
    assert "assuming model llama3-8b (L=32, h=4096, s=8192, tp=8) on H100" in out.splitlines()[0]
    assert {line.split()[5] for line in out.splitlines()[2:5]} == {"1", "2"}  # the mbs column
    code, out, _ = cli(*argv, "--format", "json")
    assert "b=" not in json.loads(out)["assumptions"]


def test_a_literal_program_is_not_refused_by_the_stage_count_of_its_ranks(cli, tmp_path):
    """The early refusal read a literal program's stages as its ranks (2) where its actions
    name 3: '3 layers do not split evenly into 2 stages' (--even) for a program that ranks."""
    f = tmp_path / "lit.pps"
    f.write_text(
        "schedule lit()\nranks 2\nmicrobatches 1\nrank 0: 0F0 2F0 2B0 0B0\nrank 1: 1F0 1B0\n"
    )
    code, out, err = cli(
        "tune", "--world", "2", "--pp", "2", "--global-batch", "1", "--micro-batch", "1",
        "--schedules", str(f), "--gpu-memory", "8000GiB", "--model", "llama3-8b,layers=3",
        "--recompute", "none", "--even", "-q", "--format", "json",
    )  # fmt: skip
    assert code == 0, out + err
    (row,) = json.loads(out)["ranked"]
    assert row["pp"] == 2 and row["stage_layers"] is None and row["step_time"] > 0
