"""Model shapes: Korthikanti et al.'s activation sizes, presets, divisibility and bad input."""

from __future__ import annotations

from fractions import Fraction

import pytest

from ppir.analysis.layout import check_layers, valid_chunk_counts
from ppir.analysis.model_spec import parse_model_spec
from ppir.analysis.models import PRESETS, ModelShape, make_model
from ppir.diagnostics import EXIT_USAGE, PpirError


def test_korthikanti_per_layer_bytes():
    m = make_model("gpt3-175b")
    s, b, h, a = 2048, 1, 12288, 96
    assert m.activation_bytes_per_layer() == s * b * h * (34 + Fraction(5 * a * s, h))
    assert m.activation_bytes_per_layer("selective") == 34 * s * b * h
    assert m.activation_bytes_per_layer("full") == 2 * s * b * h
    t8 = make_model("gpt3-175b", tp=8)
    assert t8.activation_bytes_per_layer() == m.activation_bytes_per_layer() / 8
    fp32 = make_model("gpt3-175b", dtype="fp32")
    # 4-byte elements, one-byte dropout masks: 16h elements and 2h masks, 2as scores and as masks
    assert fp32.activation_bytes_per_layer() == s * b * (16 * 4 * h + 2 * h + 9 * a * s)
    assert m.message_bytes() == s * b * h * 2


def test_act_tensors_counts_what_the_activation_function_keeps():
    m = make_model("gpt3-175b", flash=1)
    s, b, f, d = 2048, 1, 4 * 12288, 2
    assert m.act_kept == 1 and make_model("llama3-8b").act_kept == 2  # fused GeLU / SwiGLU input
    hf = make_model("gpt3-175b", flash=1, act_tensors=4)  # HF GPT-2's gelu_new, elementwise
    assert hf.activation_bytes_per_layer() - m.activation_bytes_per_layer() == 3 * s * b * f * d
    assert parse_model_spec("gpt3-175b,act_tensors=4") == make_model("gpt3-175b", act_tensors=4)


def test_norm_tensors_counts_what_each_norm_keeps():
    m = make_model("llama3-8b")
    s, b, h, d, V = 8192, 1, 4096, 2, 128256
    assert m.norm_kept == 1  # a fused kernel keeps its input
    hf = make_model("llama3-8b", norm_tensors=3)  # HF's LlamaRMSNorm in bf16 (fp32 input: 2)
    assert hf.activation_bytes_per_layer() - m.activation_bytes_per_layer() == 2 * 2 * s * b * h * d
    assert hf.head_activation_bytes() - m.head_activation_bytes() == 2 * s * b * h * d  # final norm
    assert m.head_activation_bytes() == s * b * (2 * h * d + 4 * V)  # its input and output
    assert parse_model_spec("llama3-8b,norm_tensors=3") == hf


def test_flops_per_layer_matches_24bsh2_for_4h_ffn():
    m = make_model("gpt3-175b", mbs=2)  # flash=0: the whole s x s score matrix is computed
    s, b, h = 2048, 2, 12288
    assert m.forward_flops_per_layer() == 24 * b * s * h * h + 4 * b * s * s * h
    causal = make_model("gpt3-175b", mbs=2, flash=1)  # flash attention skips the masked half
    assert causal.forward_flops_per_layer() == 24 * b * s * h * h + 2 * b * s * s * h


def test_presets_and_spec_parsing():
    assert {"gpt3-175b", "llama3-70b"} <= set(PRESETS)
    m = parse_model_spec("llama3-70b,tp=8,seq=4096")
    assert (m.name, m.layers, m.hidden, m.tp, m.seq) == ("llama3-70b", 80, 8192, 8, 4096)
    c = parse_model_spec("layers=4,hidden=64,heads=4,seq=16,mbs=2,dtype=fp16")
    assert c == ModelShape("custom", 4, 64, 4, 16, 2, "fp16")


@pytest.mark.parametrize(
    "spec,needle",
    [
        ("gpt3-175", "unknown model preset 'gpt3-175'"),
        ("layers=-4", "layers must be a positive integer, got -4"),
        ("hidden=0", "hidden must be a positive integer"),
        ("hidden=100,heads=7", "heads (7) must divide hidden (100)"),
        ("llama3-70b,tp=3", "tp=3 must divide heads (64)"),
        ("dtype=bf61", "unknown dtype 'bf61'"),
        ("hiden=4", "unknown model field 'hiden'"),
        ("seq=abc", "seq must be an integer"),
        ("act_tensors=-1", "act_tensors must be a non-negative integer"),
    ],
)
def test_bad_models_are_ppir_errors(spec, needle):
    with pytest.raises(PpirError) as e:
        parse_model_spec(spec)
    assert e.value.exit_code == EXIT_USAGE
    assert needle in e.value.render()


def test_did_you_mean():
    with pytest.raises(PpirError) as e:
        parse_model_spec("llama3-70")
    assert "did you mean 'llama3-70b'?" in e.value.render()
    with pytest.raises(PpirError) as e:
        parse_model_spec("hiden=4")
    assert "did you mean 'hidden'?" in e.value.render()


def test_divisibility_rule_lists_working_v():
    # v = 8 is not in the list for 96 layers at P=8: it would give 1.5 layers per chunk
    assert valid_chunk_counts(96, 8) == [1, 2, 3, 4, 6, 12]
    assert valid_chunk_counts(80, 8) == [1, 2, 5, 10]
    assert valid_chunk_counts(81, 8) == []
    assert check_layers(96, 32, 8) == 3
    with pytest.raises(PpirError) as e:
        check_layers(80, 32, 8)
    text = e.value.render()
    assert "80 layers do not split evenly into 32 stages (P=8, v=4)" in text
    assert "v in {1, 2, 5, 10}" in text
    with pytest.raises(PpirError) as e:
        check_layers(81, 16, 8)
    assert "81 layers are not divisible by P=8 for any v" in e.value.render()


def test_a_model_file_given_as_a_preset_points_to_profile():

    with pytest.raises(PpirError) as e:
        parse_model_spec("examples/gpt_model.py")
    text = e.value.render()
    assert "unknown model preset 'examples/gpt_model.py'" in text
    assert "ppir profile --module examples/gpt_model.py -o costs.toml, then --config" in text
    with pytest.raises(PpirError) as e:
        parse_model_spec("llama")  # a misspelt preset gets no such hint
    assert "ppir profile" not in e.value.render()


def test_the_formulas_letters_that_the_assumptions_line_prints_name_their_field():
    """The assumptions line says '(L=32, h=4096, s=8192, b=1, tp=1)'; '--model llama3-8b,b=2'
    said only "unknown model field 'b'"."""
    import ppir

    with pytest.raises(PpirError) as e:
        parse_model_spec("llama3-8b,b=2")
    assert "hint: 'b' is the formulas' letter: the field is mbs=" in e.value.render()
    from ppir.analysis.models import PAPER_NAMES

    cfg = ppir.make_config({"model": {"preset": "llama3-8b", "mbs": 2}})
    shown = cfg.describe().split("(", 1)[1].split(")", 1)[0]  # 'L=32, h=4096, ..., tp=1'
    for item in shown.split(", "):  # each letter the line prints is its field's value
        letter, value = item.split("=")
        assert getattr(cfg.model, PAPER_NAMES.get(letter, letter)) == int(value), item


def test_a_value_that_is_not_a_number_names_the_spec_as_written():
    """'--model layers=48,...,seq=8k' said '--model layers=4...q=8k (108 digits): seq must be an
    integer': the spec, not a number, was shortened as if it were a long digit string."""
    spec = "layers=48,hidden=6144,heads=48,kv_heads=8,ffn=16384,swiglu=1,vocab=128000,seq=8k"
    with pytest.raises(PpirError) as e:
        parse_model_spec(spec, "--model")
    text = e.value.render()
    assert f"--model {spec}: seq must be an integer, got '8k'" in text, text
    assert "digits" not in text.splitlines()[0]
    assert "hint: write the count in digits: seq=8000 or seq=8192" in text
    long = "1" * 30 + "x"
    with pytest.raises(PpirError) as e:
        parse_model_spec(f"llama3-8b,seq={long}", "--model")
    text = e.value.render()
    assert "--model llama3-8b,seq=11111111...111x (31 characters): seq must be" in text, text
    assert "hint" not in text


def test_heads_that_do_not_divide_hidden_get_head_counts_near_the_given_one():
    """heads=36 at hidden 6144 hinted 384, 512, ..., 6144 (the largest divisors: head
    dimensions of 16 down to 1)."""
    with pytest.raises(PpirError) as e:
        parse_model_spec("layers=48,hidden=6144,heads=36")
    assert "hint: heads that divide 6144: 12, 16, 24, 32, 48, 64, 96, 128" in e.value.render()


@pytest.mark.parametrize("command", ["analyze", "compile", "tune"])
def test_every_spec_field_is_named_in_the_help_of_model(command):
    """compile's and tune's --help named no field of a spec, and analyze's left out ffn: a
    model of one's own (ffn=16384) could not be written from --help."""
    import argparse
    import re

    from ppir.analysis.models import SPEC_FIELDS
    from ppir.cli.main import build_parser

    root = build_parser()
    sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    (model,) = [a for a in sub.choices[command]._actions if "--model" in a.option_strings]
    for field in SPEC_FIELDS:
        assert re.search(rf"\b{field}\b", model.help), (command, field, model.help)
