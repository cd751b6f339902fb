"""The cost options register through argparse's public API: a flag the command already has keeps
its meaning, the others still work, and no module reaches into argparse's private tables."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from ppir.cli.cost_options import add_cost_arguments, config_from_args

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
    "--inter-latency",
    "--bandwidth",
    "--inter-bandwidth",
    "--free-comm",
]


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    return re.findall(r"(--[a-z][a-z-]*)", parser.format_usage())


def test_every_cost_option_registers_on_a_fresh_parser():
    p = argparse.ArgumentParser()
    add_cost_arguments(p.add_argument_group("cost model"))
    assert set(COST_FLAGS) <= set(_flags(p))
    args = p.parse_args(["--model", "llama3-8b", "--comm-latency", "5"])
    assert (args.cost_model, args.cost_latency) == ("llama3-8b", "5")
    assert config_from_args(args).intra.latency == pytest.approx(5e-6)  # us with a model


def test_without_a_model_the_model_flags_are_left_out():
    p = argparse.ArgumentParser()
    add_cost_arguments(p.add_argument_group("planning"), model=False)
    flags = set(_flags(p))
    assert "--comm-latency" in flags and "--config" in flags
    assert not {"--model", "--hardware", "--bandwidth", "--free-comm"} & flags


def test_a_flag_the_command_already_has_keeps_its_meaning():
    p = argparse.ArgumentParser()
    p.add_argument("--config", dest="mine", default="x")
    add_cost_arguments(p.add_argument_group("cost model"), model=False)
    args = p.parse_args(["--config", "y", "--comm-latency", "0.5"])
    assert args.mine == "y" and not hasattr(args, "cost_config")
    assert args.cost_latency == "0.5"
    assert _flags(p).count("--config") == 1


def test_ppir_check_keeps_its_progress_model_next_to_the_planning_options(cli):
    code, out, err = cli(
        "check", "1f1b", "-D", "P=4", "--progress", "relaxed", "--comm-latency", "0.5"
    )
    assert code == 0, err
    assert "relaxed progress" in out


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
