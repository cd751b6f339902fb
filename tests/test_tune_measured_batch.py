"""ppir tune with a measured cost file: --global-batch counts samples (sequences) per step, as
everywhere else, and the profiled microbatch's size converts it into microbatches."""

from __future__ import annotations

import json

import pytest

from ppir.analysis.measured import MeasuredCosts

SAMPLES = 8  # one profiled microbatch: make_batch's 32 rows in the profile's 4 microbatches


def _file(tmp_path, size: int | None = SAMPLES) -> str:
    t = (1e-3, 1e-3)
    info = (("microbatches", 4),) + ((("microbatch_size", size),) if size else ())
    m = MeasuredCosts(2, t, (2e-3,) * 2, t, t, 1e-4, message_bytes=(64.0,), info=info)
    path = tmp_path / f"costs{size}.toml"
    path.write_text(m.to_toml())
    return str(path)


def _tune(cli, path, *extra):
    return cli("tune", "-P", "2", "--config", path, "--schedules", "1f1b", "-q", *extra)


def test_the_global_batch_is_in_samples(cli, tmp_path):
    """32 sequences are 4 microbatches of 8, not 32 microbatches (which it took them for)."""
    path = _file(tmp_path)
    code, out, err = _tune(cli, path, "--global-batch", "32", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    row = doc["ranked"][0]
    assert (doc["global_batch"], row["mbs"], row["microbatches"]) == (32, SAMPLES, 4)
    code, out, err = _tune(cli, path, "--global-batch", "32")
    assert code == 0, err
    assert out.startswith(
        "P=2, global batch 32 samples (M = 4 profiled microbatches of 8), no memory budget;"
    )
    code, out, err = _tune(cli, path)  # default: 4 x P profiled microbatches
    assert code == 0 and "global batch 64 samples (M = 8 profiled microbatches of 8)" in out


def test_the_file_keeps_the_samples_of_a_microbatch(tmp_path):
    from ppir.analysis.measured import from_table
    from ppir.analysis.toml_file import load_config_file

    path = _file(tmp_path)
    assert "microbatch_size = 8" in open(path).read()
    m = from_table(load_config_file(path)["measured"], path)
    assert m.microbatch_size == SAMPLES


@pytest.mark.parametrize(
    "size, argv, message",
    [
        (SAMPLES, ["--global-batch", "30"], "--global-batch 30: not a whole number of profiled "
                                            "microbatches of 8 samples (try 24 or 32)"),
        (SAMPLES, ["--global-batch", "4"], "(try 8)"),
        (SAMPLES, ["--micro-batch", "1"], "--micro-batch 1: measured costs are per profiled "
                                          "microbatch of 8 samples: profile again"),
        (None, ["--global-batch", "32"], "--global-batch 32 counts samples (sequences) per step, "
                                         "but --config"),
        (None, ["--micro-batch", "2"], "--micro-batch 2: measured costs are per profiled "
                                       "microbatch: profile again"),
    ],
)  # fmt: skip
def test_what_cannot_be_converted_is_refused(cli, tmp_path, size, argv, message):
    code, _, err = _tune(cli, _file(tmp_path, size), *argv)
    assert code == 2 and "Traceback" not in err and message in err, err


def test_a_file_that_does_not_record_the_size_says_its_unit(cli, tmp_path):
    code, out, err = _tune(cli, _file(tmp_path, None))
    assert code == 0, err
    assert "global batch 8 profiled microbatches (the cost file does not say how many" in out


def test_a_bad_size_is_named(tmp_path):
    from ppir.analysis.measured import from_table
    from ppir.diagnostics import PpirError

    table = {"stages": 1, "F": [1.0], "B": [1.0], "I": [1.0], "W": [1.0], "microbatch_size": 0}
    with pytest.raises(PpirError) as e:
        from_table(table, "c.toml")
    assert "c.toml: measured.microbatch_size must be a positive integer, got 0" in str(
        e.value.diagnostics[0].message
    )


@pytest.mark.parametrize("P, lcm", [(3, 6), (4, 4)])
def test_a_pipeline_size_the_file_cannot_time_is_a_usage_error(cli, tmp_path, P, lcm):
    """was: every built-in rejected as a 'constraint', one line per schedule and v, under
    '(no feasible choice): no schedule accepts these sizes ... try other --global-batch,
    --micro-batch or --pp values', exit 1: the cost file, measured on 2 stages, was the
    mistake."""
    code, out, err = cli("tune", "-P", str(P), "--config", _file(tmp_path), "-q")
    assert (code, out) == (2, "") and "Traceback" not in err
    assert err.splitlines() == [
        f"ppir: error: -P {P}: the cost file was measured on 2 stages, and a schedule of {P} "
        f"ranks runs a multiple of {P} stages: none can use it",
        f"hint: pipeline sizes 1, 2 can; or profile again with --stages {lcm}",
    ]
    code, out, err = cli("tune", "-P", "2", "--config", _file(tmp_path), "-q")
    assert code == 0, err


def test_world_searches_only_the_pipeline_sizes_the_file_can_time(cli, tmp_path):
    """was: --world 4 searched P = 4 too and listed each of its choices as a constraint
    rejection ('the measured costs are for 2 stages; a schedule with 4 stages cannot use
    them'), where -P 4 is refused as a usage error: the sizes the file cannot time are now
    left out of the search, said once."""
    argv = ["tune", "--world", "4", "--model", "llama3-8b,seq=1024", "--config", _file(tmp_path)]
    code, out, err = cli(*argv, "--schedules", "1f1b", "-q", "--format", "json")
    assert code == 0, err
    assert err.splitlines() == [
        "ppir: note: --world 4: the cost file was measured on 2 stages, and a schedule of P "
        "ranks runs a multiple of P stages: searching pipeline sizes 1, 2 only, not 4 (profile "
        "again with --stages 4 to time them all)"
    ]
    doc = json.loads(out)
    rows = doc["ranked"] + doc["slower"] + doc["pruned"] + doc["rejected"]
    assert {r["pp"] for r in rows} == {1, 2} and doc["rejected"] == []
    code, out, err = cli(*argv, "--pp", "4", "-q")  # a size given is still refused
    assert code == 2 and out == "" and err.startswith("ppir: error: --pp 4: the cost file")


def test_with_a_model_too_the_micro_batch_is_the_profiled_one(cli, tmp_path):
    """A model beside measured costs gives memory only.  was: tune searched micro-batches 1 and
    2 and all three recomputations, each timed with the profiled microbatch's costs (8
    samples), so a microbatch of 1 sample took as long as one of 8, and full recomputation
    cost no time and came out first where memory was tight."""
    argv = ["tune", "--world", "2", "--model", "llama3-8b,seq=1024", "--config", _file(tmp_path)]
    code, out, err = cli(*argv, "--schedules", "1f1b", "-q", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    rows = doc["ranked"] + doc["slower"] + doc["pruned"] + doc["rejected"]
    assert {(r["mbs"], r["recompute"]) for r in rows} == {(SAMPLES, "none")}
    assert doc["global_batch"] == 4 * 2 * SAMPLES  # 4 x P profiled microbatches, as without
    code, _, err = cli(*argv, "--micro-batch", "1,2", "-q")
    assert code == 2 and "--micro-batch 1,2: measured costs are per profiled microbatch" in err


@pytest.mark.parametrize(
    "model, value, message",
    [
        (True, "none,selective", "every one would be timed alike"),
        (True, "full,none", "every one would be timed alike"),
        (False, "selective", "without --model nothing sizes it either"),
        (False, "none,full", "without --model nothing sizes it either"),
    ],
)
def test_recomputation_is_not_compared_on_measured_costs(cli, tmp_path, model, value, message):
    """was: --recompute none,selective,full beside a model ranked every recomputation at the
    profiled step time, the one keeping the least memory first (full recomputation looked
    free); without a model the hint sent the user to add one, which did exactly that."""
    argv = ["tune", "--config", _file(tmp_path), "--schedules", "1f1b", "-q"]
    argv += ["--world", "2", "--model", "llama3-8b,seq=1024"] if model else ["-P", "2"]
    code, out, err = cli(*argv, "--recompute", value)
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert err.startswith(f"ppir: error: --recompute {value}: measured costs are the profiled")
    assert message in err and "profile it once per setting" in err
    if model:  # one value beside a model still sizes its memory
        code, out, err = cli(*argv, "--recompute", "selective", "--format", "json")
        assert code == 0, err
        assert {r["recompute"] for r in json.loads(out)["ranked"]} == {"selective"}
