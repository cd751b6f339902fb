"""ppir analyze on the command line (in-process): table, JSON schema, errors."""

from __future__ import annotations

import json

import pytest

from ppir.analysis.memory import ANALYSIS_FORMAT


def test_json_schema(cli):
    code, out, err = cli(
        "analyze", "interleaved_1f1b", "-D", "P=4", "-D", "M=8", "-D", "v=2", "--format", "json"
    )
    assert code == 0, err
    d = json.loads(out)
    assert d["format"] == ANALYSIS_FORMAT == "ppir.analysis/2"
    assert (d["schedule"], d["params"], d["ranks"], d["stages"]) == (
        "interleaved_1f1b",
        {"P": 4, "M": 8, "v": 2, "N": 4},
        4,
        8,
    )
    assert [r["peak_activations"] for r in d["per_rank"]] == [5.5, 4.5, 3.5, 2.5]
    assert [r["peak_chunks"] for r in d["per_rank"]] == [11, 9, 7, 5]
    assert d["per_rank"][0]["peak_activations_exact"] == "11/2"
    assert d["per_rank"][0]["peak_op"] == "0F6"
    assert max(d["per_rank"][0]["curve_chunks"]) == 11
    assert d["p2p"]["forward_per_microbatch"] == 7 == d["p2p"]["backward_per_microbatch"]
    assert d["worst_rank"] == 0 and d["model"] is None


def test_json_with_model_has_bytes(cli):
    code, out, err = cli(
        "analyze",
        "1f1b",
        "-D",
        "P=4",
        "-D",
        "M=8",
        "--model",
        "layers=8,hidden=64,heads=4,seq=16",
        "--recompute",
        "selective",
        "--format",
        "json",
    )
    assert code == 0, err
    d = json.loads(out)
    per_layer = 34 * 16 * 64  # s*b*h*34 bytes at 16 bits
    assert d["memory"]["layers_per_stage"] == 2
    assert d["per_rank"][0]["peak_bytes"] == 4 * 2 * per_layer
    assert d["p2p"]["message_bytes"] == 16 * 64 * 2
    assert d["p2p"]["bytes_per_step"] == 2 * 3 * 8 * 16 * 64 * 2


def test_table(cli):
    code, out, _ = cli("analyze", "1f1b", "-D", "P=3", "-D", "M=4", "--curve")
    assert code == 0
    assert "rank  chunks  peak A  peak chunks" in out
    assert "p2p per microbatch: forward 2, backward 2 messages" in out
    assert "  rank 0 |" in out


def test_layers_not_divisible(cli):
    code, _, err = cli(
        "analyze", "interleaved_1f1b", "-D", "P=8", "-D", "M=8", "-D", "v=4", "--layers", "80"
    )
    assert code == 2
    assert "80 layers do not split evenly into 32 stages" in err
    assert "hint: for P=8, v in {1, 2, 5, 10} divides 80 layers" in err


def test_bad_model(cli):
    code, _, err = cli("analyze", "1f1b", "--model", "gtp3-175b")
    assert code == 2 and "did you mean 'gpt3-175b'?" in err
    code, _, err = cli("analyze", "1f1b", "--model", "hidden=100,heads=3")
    assert code == 2 and "heads (3) must divide hidden (100)" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "spec, said",
    [
        ("", "--model needs a preset or key=value pairs, got an empty text"),
        (",", "--model ,: an empty entry between commas"),
        ("llama3-8b,,seq=4096", "an empty entry between commas"),
        ("gpt2-xl,seq=99999999999999999999999", "--model seq: integer 99999999999999999999999 is"),
        ("gpt2-xl,seq=" + "9" * 5000, "integer 99999999...9999 (5,000 digits) is too large"),
    ],
)
@pytest.mark.parametrize("command", ["analyze", "compile"])
def test_a_model_spec_that_names_no_model_is_refused_not_read_as_none(cli, command, spec, said):
    """'' meant no model and ',' a 'custom' 24-layer model, silently; a seq beyond the integer
    limit printed 1.1e41 GiB."""
    code, _, err = cli(command, "1f1b", "--model", spec)
    assert code == 2 and said in err and "Traceback" not in err


def test_a_trailing_comma_in_a_model_spec_is_fine(cli):
    assert cli("analyze", "1f1b", "--model", "llama3-8b,")[0] == 0


def test_bad_i_fraction(cli):
    code, _, err = cli("analyze", "1f1b", "--i-fraction", "3/2")
    assert code == 2 and "--i-fraction 3/2: must be at most 1 (I frees at most the whole" in err
    code, out, err = cli("analyze", "zb_h1", "--i-fraction=-3/2")  # I keeps 3/2 chunks more
    assert code == 0 and "I frees nothing and adds 3/2 of a chunk" in out, out + err


@pytest.mark.parametrize("fraction, code", [("-1e400", 2), ("-1e18", 0), ("-1e18-1", 2)])
def test_an_i_fraction_below_minus_1e18_is_refused_not_a_traceback(cli, fraction, code):
    """``--i-fraction=-1e400`` (exact as a Fraction) ended in an OverflowError traceback when
    the table gave it as a float."""
    text = fraction if fraction != "-1e18-1" else f"-{10**18 + 1}"
    got, _, err = cli("analyze", "zb_h1", f"--i-fraction={text}", "--format", "json")
    assert got == code and "Traceback" not in err
    if code == 2:
        assert err == (
            f"ppir: error: --i-fraction {text}: must be at least -1e18 (I keeps at most 1e18 "
            "chunks more than it frees; under full recomputation it is about -20)\n"
        )


def test_split_line_says_what_i_and_w_do(cli):
    code, out, _ = cli("analyze", "zb_h1", "-D", "P=4", "-D", "M=8", "--i-fraction", "1/4")
    assert code == 0 and "split backward: I frees 1/4 of a chunk, W the rest;" in out
    code, out, _ = cli("analyze", "zb_h1", "-D", "P=4", "-D", "M=8", "--i-fraction=-1/4")
    assert code == 0 and "I frees nothing and adds 1/4 of a chunk (the gradients W needs)" in out


def test_with_a_model_analyze_plans_the_program_compile_runs(cli):
    """analyze --model plans the lowering with the model's costs, as compile --model does, so
    both print the same whole memory (v_min's receive buffers depend on the lowering: analyze
    planned with free communication and printed half of compile's); and --comm-latency-us,
    which needs a model, takes analyze's."""
    argv = ["v_min", "-D", "P=4", "-D", "M=16", "--model", "llama3-8b", "--format", "json"]
    for extra in ([], ["--comm-latency-us", "30"]):
        code, out, err = cli("analyze", *argv, *extra)
        assert code == 0, err
        analyzed = [r["memory"] for r in json.loads(out)["per_rank"]]
        code, out, err = cli("compile", *argv, *extra)
        assert code == 0, err
        compiled = [r["memory"] for r in json.loads(out)["per_rank"]]
        assert analyzed == compiled
    assert analyzed[0]["buffers"] > 0


@pytest.mark.parametrize("command", [["analyze"], ["compile", "--backend", "cost"]])
@pytest.mark.parametrize("config", [False, True])
def test_a_bad_stage_layers_entry_is_named_by_the_flag(cli, tmp_path, command, config):
    """was: 'cost options: entry 1 '4xx8' is not a layer count' (or the --config file's name,
    as if the file held it): the flag the value came from was not named."""
    extra = []
    if config:
        path = tmp_path / "c.toml"
        path.write_text('[model]\npreset = "llama3-8b"\n')
        extra = ["--config", str(path)]
    argv = [command[0], "1f1b", "-D", "P=8", *command[1:], "--model", "llama3-8b", *extra]
    code, out, err = cli(*argv, "--stage-layers", "4xx8")
    assert (code, out) == (2, "") and "Traceback" not in err
    assert err.splitlines() == [
        "ppir: error: --stage-layers 4xx8: entry 1 '4xx8' is not a layer count: give counts or "
        "'count x repeats', e.g. 6,7x10,6"
    ]


@pytest.mark.parametrize(
    "command", [["analyze"], ["compile", "--backend", "cost"], ["analyze", "--layers", "48"]]
)
def test_layers_that_do_not_divide_the_stages_suggest_a_layout(cli, command):
    """48 layers at P=5 said only "48 layers are not divisible by P=5 for any v", though
    --stage-layers takes an uneven layout (what ppir tune prints in its layers column)."""
    model = "llama3-8b,layers=48,tp=8"
    code, _, err = cli(command[0], "1f1b", "-D", "P=5", "-D", "M=8", "--model", model, *command[1:])
    assert code == 2 and "48 layers do not split evenly into 5 stages" in err
    assert "hint: or lay them out unevenly: --stage-layers 9,10x3,9" in err, err
    code, _, err = cli(
        command[0], "1f1b", "-D", "P=5", "-D", "M=8", "--model", model, *command[1:],
        "--stage-layers", "9,10x3,9",
    )  # fmt: skip
    assert code == 0, err
    code, _, err = cli("analyze", "1f1b", "-D", "P=5", "-D", "M=8", "--layers", "48")
    assert code == 2 and "--stage-layers" not in err  # no model: no layout to give
