"""The cost options register through argparse's public API, a flag taken twice is an error
(not a silent skip), latencies are in the unit their flag names, and no module reaches into
argparse's private tables."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from ppir.cli.cost_options import add_cost_arguments, config_from_args
from ppir.diagnostics import PpirError

ROOT = Path(__file__).resolve().parent.parent
COST_FLAGS = [
    "--config",
    "--model",
    "--recompute",
    "--hardware",
    "--efficiency",
    "--ranks-per-node",
    "--cost",
    "--stage-weights",
    "--comm-latency",
    "--comm-latency-us",
    "--inter-latency",
    "--inter-latency-us",
    "--bandwidth",
    "--inter-bandwidth",
    "--free-comm",
]


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    return re.findall(r"(--[a-z][a-z-]*)", parser.format_usage())


def _parser(model: bool = True) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_cost_arguments(p.add_argument_group("cost model"), model=model)
    return p


def test_every_cost_option_registers_on_a_fresh_parser(capsys):
    p = _parser()
    assert set(COST_FLAGS) <= set(_flags(p))
    args = p.parse_args(["--model", "llama3-8b", "--comm-latency-us", "5"])
    assert (args.cost_model, args.cost_latency_us) == ("llama3-8b", "5")
    cfg = config_from_args(args)
    assert cfg.intra.latency == pytest.approx(5e-6)
    assert cfg.inter.latency == pytest.approx(8e-6)  # the H100 preset's, untouched
    args = p.parse_args(["--model", "llama3-8b", "--inter-latency-us", "20"])
    assert config_from_args(args).inter.latency == pytest.approx(20e-6)
    assert capsys.readouterr().err == ""  # the new spellings warn about nothing


def test_comm_latency_is_in_forward_units_without_a_model(capsys):
    args = _parser().parse_args(["--comm-latency", "0.5", "--inter-latency", "2"])
    cfg = config_from_args(args)
    assert (cfg.intra.latency, cfg.inter.latency) == (0.5, 2)
    assert capsys.readouterr().err == ""


def test_comm_latency_with_a_model_is_read_as_microseconds_with_a_warning(capsys):
    args = _parser().parse_args(["--model", "llama3-8b", "--comm-latency", "5"])
    assert config_from_args(args).intra.latency == pytest.approx(5e-6)  # the old meaning
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ppir: warning: --comm-latency 5 with a model")
    assert "--comm-latency-us 5" in err


def test_microsecond_latency_without_a_model_is_a_clear_error():
    args = _parser().parse_args(["--comm-latency-us", "5"])
    with pytest.raises(PpirError, match=r"--comm-latency-us 5: microseconds need a model"):
        config_from_args(args)


def test_both_latency_spellings_at_once_are_refused():
    args = _parser().parse_args(
        ["--model", "llama3-8b", "--comm-latency", "1"] + ["--comm-latency-us", "2"]
    )
    with pytest.raises(PpirError, match="not both"):
        config_from_args(args)


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--comm-latency-us", "5"], "--comm-latency-us 5"),
        (
            ["--bandwidth", "100", "--inter-latency-us", "9"],
            "--inter-latency-us 9, --bandwidth 100",
        ),
    ],
)
def test_free_communication_with_link_costs_is_refused(cli, flags, named):
    """``--free-comm --comm-latency-us 5`` printed 'free communication' and dropped the
    latency without a word."""
    argv = ["compile", "1f1b", "--model", "llama3-8b", "--free-comm", *flags]
    code, out, err = cli(*argv)
    assert code == 2 and not out
    assert err == f"ppir: error: --free-comm with {named}: give one or the other\n"
    assert cli(*argv[: -len(flags)])[0] == 0  # alone it is fine


def test_without_a_model_the_model_flags_are_left_out():
    flags = set(_flags(_parser(model=False)))
    assert {"--comm-latency", "--comm-latency-us", "--config"} <= flags
    assert not {"--model", "--hardware", "--bandwidth", "--free-comm"} & flags


def test_a_flag_the_command_already_has_is_an_error_not_a_silent_skip():
    p = argparse.ArgumentParser()
    p.add_argument("--config", dest="mine", default="x")
    with pytest.raises(argparse.ArgumentError, match="--config"):
        add_cost_arguments(p.add_argument_group("cost model"), model=False)


def test_ppir_check_keeps_its_progress_model_next_to_the_planning_options(cli):
    code, out, err = cli(
        "check", "1f1b", "-D", "P=4", "--progress-model", "relaxed", "--comm-latency", "0.5"
    )
    assert code == 0, err
    assert "relaxed progress" in out and err == ""


def test_the_old_progress_spelling_still_works_with_one_warning(cli):
    code, out, err = cli("check", "1f1b", "-D", "P=4", "--progress", "relaxed")
    assert code == 0 and "relaxed progress" in out
    assert err == (
        "ppir: warning: --progress is deprecated: use --progress-model "
        "(--progress goes away in the next release)\n"
    )


def test_no_cli_module_reads_argparse_private_attributes():
    parser = argparse.ArgumentParser()
    group = parser.add_argument_group("g")
    private = {
        name
        for obj in (parser, group)
        for name in dir(obj)
        if name.startswith("_") and not name.startswith("__")
    }
    assert "_option_string_actions" in private  # the list is the real one
    pattern = re.compile(r"[.\"'](" + "|".join(sorted(private)) + r")\b")
    for folder in ("ppir", "backends"):
        for path in (ROOT / folder).rglob("*.py"):
            hits = pattern.findall(path.read_text())
            assert not hits, f"{path.relative_to(ROOT)} uses argparse internals {hits}"


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--cost", "B=1e400"], "costs.B must be 0 or 1e-18..1e18 in magnitude"),
        (["--cost", "B=" + "9" * 300], "got 99999999999999999999... (300 characters)"),
        (["--cost", "W=1e-400"], "costs.W must be 0 or 1e-18..1e18"),
        (["--stage-weights", "1e400,1,1,1"], "costs.stage_weights must be 0 or 1e-18"),
        (["--comm-latency", "1e400"], "comm.latency must be 0 or 1e-18"),
    ],
)
def test_numbers_no_float_can_hold_are_refused_at_the_value(cli, argv, said):
    """Costs are divided and summed as floats: 1e400 passed the exact-fraction parse and
    overflowed later (an OverflowError traceback)."""
    for command in (["compile", "1f1b"], ["tune", "-P", "4", "--memory-budget", "6A"]):
        code, out, err = cli(*command, *argv)
        assert code == 2 and said in err and "Traceback" not in err, (command, err)


def test_recompute_without_a_model_is_refused_where_only_a_model_gives_it_meaning(cli):
    """compile made up a 24-layer model for it (and printed milliseconds); analyze uses it
    without a model (how much of an activation I frees), so it stays."""
    code, out, err = cli("compile", "1f1b", "--recompute", "full")
    assert code == 2 and "--recompute full needs a model" in err
    assert cli("compile", "1f1b", "--recompute", "full", "--model", "llama3-8b")[0] == 0
    code, out, err = cli("analyze", "zb_h1", "--recompute", "full", "--format", "json")
    assert code == 0, err
    plain = json.loads(cli("analyze", "zb_h1", "--format", "json")[1])
    assert json.loads(out)["per_rank"] != plain["per_rank"]  # I frees all of it: it counts


def test_a_trailing_comma_in_the_model_spec_with_layers(cli):
    code, out, err = cli("analyze", "1f1b", "--model", "llama3-8b,", "--layers", "32")
    assert code == 0, err


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--model", "llama3-8b", "--efficiency", "45"],
            "--efficiency 45: hardware.efficiency is a fraction of peak in (0, 1], got 45",
        ),
        (
            ["--model", "llama3-8b", "--bandwidth", "-1"],
            "--bandwidth -1: comm.intra_bandwidth_gbs must be positive, got -1",
        ),
        (
            ["--model", "llama3-8b", "--comm-latency-us", "-5"],
            "--comm-latency-us -5: comm.intra_latency_us must be >= 0, got -5",
        ),
        (
            ["--hardware", "H100"],
            "--hardware H100: hardware.preset needs a model: op times come from the model's FLOPs",
        ),
        (["--cost", "B=3,F=-1"], "--cost F=-1: costs.F must be >= 0, got -1"),
        (["--cost", "FB=x"], "--cost FB=x: costs.FB must be a number, got 'x'"),
        (
            ["--stage-weights", "1,2,3,0"],
            "--stage-weights 1,2,3,0: costs.stage_weights must be positive, got 0",
        ),
    ],
)
def test_a_bad_cost_flag_is_named_by_the_flag_and_its_value(cli, flags, message):
    """They were named by the settings key after 'cost options:' ('cost options:
    hardware.efficiency ...'), which is what a --config file says, not what was typed."""
    code, out, err = cli("compile", "1f1b", "--backend", "cost", *flags)
    assert (code, out) == (2, "")
    assert err.splitlines()[0] == f"ppir: error: {message}"


def test_a_bad_value_of_a_config_file_is_still_named_by_the_file(cli, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[hardware]\nefficiency = 3\n[model]\npreset = "llama3-8b"\n')
    code, _, err = cli("compile", "1f1b", "--backend", "cost", "--config", str(cfg))
    assert code == 2
    assert err.splitlines()[0] == (
        f"ppir: error: {cfg}: hardware.efficiency is a fraction of peak in (0, 1], got 3"
    )
    code, _, err = cli(
        "compile", "1f1b", "--backend", "cost", "--config", str(cfg), "--efficiency", "5"
    )
    assert err.splitlines()[0].startswith("ppir: error: --efficiency 5: hardware.efficiency")
    cfg.write_text("[costs]\nF = -1\n")  # --cost gives B only: F is the file's
    code, _, err = cli("compile", "1f1b", "--config", str(cfg), "--cost", "B=3")
    assert err.splitlines()[0] == f"ppir: error: {cfg}: costs.F must be >= 0, got -1"


@pytest.mark.parametrize(
    "table, message",
    [
        ('recompute = "selectve"', "[model]: unknown recompute mode 'selectve'"),
        ('tp = "8"', "[model]: model llama3-8b: tp must be a positive integer, got '8'"),
    ],
)
def test_a_bad_model_table_of_a_config_file_names_the_file(cli, tmp_path, table, message):
    """'unknown recompute mode' named no file, though only the --config file could hold it."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[model]\npreset = "llama3-8b"\n{table}\n')
    code, _, err = cli("compile", "1f1b", "--backend", "cost", "--config", str(cfg))
    assert code == 2
    assert err.splitlines()[0] == f"ppir: error: {cfg}: {message}"
    cfg.write_text('[model]\npreset = "llama3-8bb"\n')
    code, _, err = cli("compile", "1f1b", "--backend", "cost", "--config", str(cfg))
    assert err.splitlines()[0] == f"ppir: error: {cfg}: [model]: unknown model preset 'llama3-8bb'"


def test_stage_weights_of_the_wrong_count_are_quoted():
    """The count is checked against the schedule when it is compiled, where the flag is not
    known: the message quotes the weights (it named neither the flag nor the values)."""
    from ppir.analysis.config import CostConfig
    from ppir.analysis.costs import costs_for
    from ppir.frontend.loader import load_schedule

    s = load_schedule("1f1b", {"P": 4, "M": 8})
    with pytest.raises(PpirError) as e:
        costs_for(s, CostConfig(stage_weights=(1, 2.5)))
    assert e.value.diagnostics[0].message == (
        "stage weights 1,2.5: 2 entries but 1f1b has 4 stages (missing 2)"
    )
    with pytest.raises(PpirError) as e:
        costs_for(s, CostConfig(stage_weights=(1,) * 20))
    assert e.value.diagnostics[0].message.startswith(
        "stage weights 1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,... (4 more): 20 entries but 1f1b has 4"
    )


@pytest.mark.parametrize(
    "command, flag, said",
    [
        (["check", "1f1b"], "--cost", "--cost '': expected K=X,..., e.g. --cost F=1,B=2"),
        (["tune", "-P", "4"], "--cost", "--cost '': expected K=X,..., e.g. --cost F=1,B=2"),
        (
            ["synth", "-D", "P=4", "-D", "M=8", "--mem-cap", "4"],
            "--cost",
            "--cost '': expected K=X,..., e.g. --cost F=1,B=2",
        ),
        (
            ["compile", "1f1b"],
            "--stage-weights",
            "--stage-weights : costs.stage_weights must be a number, got ''",
        ),
    ],
)
def test_an_empty_cost_or_stage_weights_is_refused_not_read_as_none(cli, command, flag, said):
    """``--cost ''`` and ``--stage-weights ''`` (an unset shell variable) were taken for no
    option at all, and the defaults ran, where an empty --model, -p or --placement is refused."""
    code, out, err = cli(*command, flag, "")
    assert code == 2 and not out and err == f"ppir: error: {said}\n"
