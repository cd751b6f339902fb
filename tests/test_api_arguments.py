"""Arguments of the wrong type or value given to the Python API (a second new-user trial's
findings): each is an error naming the argument and the value, not an AttributeError, KeyError
or TypeError from deep inside."""

from __future__ import annotations

import re

import pytest

import ppir


@pytest.mark.parametrize("mode", [1, True, None, ["full"]])
def test_a_recompute_mode_of_another_type_is_named(mode):
    """Was "AttributeError: 'int' object has no attribute 'lower'" from did_you_mean."""
    s = ppir.load("1f1b", P=2, M=2)
    for call in (
        lambda: ppir.analyze(s, "llama3-8b", recompute=mode),
        lambda: ppir.analyze(s, recompute=mode),
        lambda: ppir.make_config({"model": {"preset": "llama3-8b", "recompute": mode}}),
    ):
        with pytest.raises(ppir.PpirError) as e:
            call()
        assert e.value.message == f"recompute takes a mode name, got {type(mode).__name__} {mode!r}"
        assert "hint: modes: none, selective, full" in str(e.value)


@pytest.mark.parametrize(
    "value, error, said",
    [
        ("x", ValueError, "i_fraction takes a number of at most 1, got 'x'"),
        (float("nan"), ValueError, "i_fraction takes a number of at most 1, got nan"),
        (float("inf"), ValueError, "i_fraction takes a number of at most 1, got inf"),
        ([1], TypeError, "i_fraction takes a number of at most 1, got list [1]"),
        (True, TypeError, "i_fraction takes a number of at most 1, got bool True"),
        (2, ValueError, "i_fraction must be at most 1, got 2"),
    ],
)
def test_an_i_fraction_that_is_no_fraction_is_named(value, error, said):
    """Were fractions.Fraction's own errors ("Invalid literal for Fraction: 'x'", "cannot
    convert NaN to integer ratio", an OverflowError) naming neither the argument nor ppir."""
    s = ppir.load("zb_h1", P=2, M=2)
    with pytest.raises(error) as e:
        ppir.analyze(s, i_fraction=value)
    assert str(e.value) == said
    assert (
        ppir.analyze(s, i_fraction=0.5).memory.i_fraction
        == ppir.analyze(s, i_fraction="1/2").memory.i_fraction
    )


TYPO = """schedule gpipe(P = 2, M = 4)
ranks P
microbatches M
program r {
  for m in 0 .. M { F(m) }
  for m in 0 .. M { B(mb) }
}
"""


def test_load_text_names_a_path_of_another_type_and_takes_none_as_no_path(tmp_path):
    """path=None gave every error the file 'None' ('None:6:23: error: ...'), path=5 the
    file '5'."""
    with pytest.raises(ppir.PpirError) as e:
        ppir.load_text(TYPO, path=None)
    assert str(e.value).startswith("<string>:6:23: error: undefined name 'mb'")
    with pytest.raises(ppir.PpirError) as e:
        ppir.load_text(TYPO, path=tmp_path / "g.pps")
    assert str(e.value).startswith(f"{tmp_path / 'g.pps'}:6:23: error: undefined name 'mb'")
    with pytest.raises(ppir.PpirError) as e:
        ppir.load_text(TYPO, path=5)
    assert e.value.kind == "bad-usage"
    assert e.value.message == (
        "load_text's path (the name errors give the text) takes a str or os.PathLike, got int 5"
    )


def test_graph_of_a_compiled_program_is_under_its_own_progress_model():
    """graph(c) of a relaxed compile built a fifo graph again (its default was 'fifo', where
    verify and estimate default to the compile's own model), and progress=None was
    'unknown progress model None'."""
    s = ppir.load("1f1b", P=3, M=4)
    relaxed = ppir.compile(s, progress="relaxed")
    assert ppir.graph(relaxed) is relaxed.graph
    assert ppir.graph(relaxed, progress=None) is relaxed.graph
    assert ppir.graph(relaxed, "fifo").progress == "fifo"
    fifo = ppir.compile(s)
    assert ppir.graph(fifo) is fifo.graph
    assert ppir.graph(s, progress=None).progress == "fifo"


@pytest.mark.parametrize("progress", ["x", 1, "FIFO"])
def test_an_unknown_progress_model_is_named_for_a_compiled_program_too(progress):
    """estimate(c, progress='x') said 'a compiled program is timed under the costs and progress
    model it was compiled with; compile it again with them', as if 'x' were a model."""
    c = ppir.compile(ppir.load("1f1b", P=2, M=2))
    said = f"unknown progress model {progress!r} (expected one of ('fifo', 'relaxed'))"
    for call in (ppir.estimate, ppir.verify, ppir.graph):
        with pytest.raises(ValueError) as e:
            call(c, progress=progress)
        assert str(e.value) == said


@pytest.mark.parametrize("make", [ppir.LowerComms, ppir.OverlapComms, *ppir.PASSES.values()])
def test_a_pass_applied_to_no_schedule_names_it(make):
    """LowerComms().apply('1f1b') was "AttributeError: 'str' object has no attribute
    'is_lowered'", OverlapComms().apply(...) "... no attribute 'programs'"."""
    p = make()
    with pytest.raises(TypeError) as e:
        p.apply("1f1b")
    name = f"{type(p).__name__}.apply"
    assert (
        str(e.value)
        == f"{name} takes a Schedule (ppir.load('1f1b', P=4, M=8) makes one), got str '1f1b'"
    )
    c = ppir.compile(ppir.load("1f1b", P=2, M=2))
    with pytest.raises(TypeError, match=rf"^{name} takes a Schedule .*, got Compiled "):
        p.apply(c)


@pytest.mark.parametrize(
    "make, error, said",
    [
        (lambda: ppir.OverlapComms(hoist="2"), TypeError, "an int, got '2'"),
        (lambda: ppir.OverlapComms(hoist=1.5), TypeError, "an int, got 1.5"),
        (lambda: ppir.OverlapComms(hoist=-1), ValueError, "at least 0, got -1"),
        (lambda: ppir.LowerComms(costs=5), TypeError, "makes them), got int 5"),
        (lambda: ppir.LowerComms(costs=ppir.make_config({})), TypeError, "got CostConfig"),
    ],
)
def test_a_pass_option_of_the_wrong_type_is_named_when_made(make, error, said):
    """OverlapComms(hoist='2') was "'<' not supported between instances of 'str' and 'int'",
    hoist=1.5 was taken, and LowerComms(costs=5) failed at apply with "'int' object has no
    attribute 'for_planning'"."""
    with pytest.raises(error) as e:
        make()
    assert said in str(e.value)


@pytest.mark.parametrize("value", ["x", None, 2.5, True])
def test_an_expansion_cap_that_is_no_int_is_named(value):
    """load_text(src, max_ops='x') and check_schedule(..., max_ops=None) raised "'>' not
    supported between instances of 'int' and 'str'" from the limit checks; 2.5 was taken and
    quoted as 'over the cap of 2.5'."""
    from ppir.testing import check_schedule

    good = TYPO.replace("B(mb)", "B(m)")
    for cap, call in (
        ("max_ops", lambda: ppir.load_text(good, max_ops=value)),
        ("max_steps", lambda: ppir.load_text(good, max_steps=value)),
        ("max_ops", lambda: check_schedule("1f1b", P=2, M=2, max_ops=value)),
    ):
        with pytest.raises(ppir.PpirError) as e:
            call()
        said = f"{cap} takes an int, got {type(value).__name__} {value!r}"
        assert (e.value.kind, e.value.message) == ("bad-usage", said)


def test_a_compiled_program_shows_as_one_line():
    """repr(ppir.compile(s)) was the dataclass' fields, programs, graphs and timelines: 78 KB
    of text for interleaved 1F1B at P=4, M=8, what a REPL or a notebook shows for 'c'."""
    c = ppir.compile(ppir.load("interleaved_1f1b", P=4, M=8, v=2))
    assert repr(c) == (
        "<Compiled interleaved_1f1b(P=4, M=8, v=2, N=4): ok, 4 ranks, pipeline "
        "'lower-comms,overlap-comms', fifo progress>"
    )
    naive = ppir.compile(ppir.load("1f1b", P=3, M=4), lowering="naive")
    assert repr(naive).startswith("<Compiled 1f1b(P=3, M=4): failed at lower-comms, 3 ranks")


def test_api_md_gives_compile_the_signature_it_has():
    """api.md said dp=1 by default; it is None (the model's dp, else 1), and compile(s,
    costs=cfg, dp=1) with a model at dp=4 is refused: the documented default was an error."""
    import ast
    import inspect
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text()
    [doc] = re.findall(r"`ppir\.compile\((schedule, \*,.*?)\)`:", text, re.S)
    fn = ast.parse(f"def compile({' '.join(doc.split())}): pass").body[0]
    documented = {
        a.arg: ast.literal_eval(d) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults)
    }
    real = inspect.signature(ppir.compile).parameters
    assert documented == {n: p.default for n, p in real.items() if p.kind is p.KEYWORD_ONLY}


def test_the_wait_for_view_of_a_cyclic_compute_order_has_the_cycle():
    """g.wait_for() of a compute-only schedule dropped its data edges, which are its waits, and
    kept the order edges alone: rank 0 running B0 before F1 while rank 1 runs F1 before B0 (a
    cycle the verifier reports) showed as an acyclic wait-for graph."""
    import networkx as nx

    prog = tuple(
        tuple(ppir.Action(st, k, mb) for k, mb in order)
        for st, order in enumerate(
            [
                [("F", 0), ("B", 0), ("F", 1), ("B", 1)],  # B0 before F1
                [("F", 0), ("F", 1), ("B", 0), ("B", 1)],
            ]
        )
    )
    cyclic = ppir.Schedule("cyclic", (), 2, 2, 2, (0, 1), prog)
    assert not ppir.verify(cyclic).ok
    g = ppir.graph(cyclic)
    cycle = nx.find_cycle(g.wait_for())
    assert {g.nodes[u]["label"] for u, _ in cycle} == {"r0:0B0", "r0:0F1", "r1:1F1", "r1:1B0"}
    lowered = ppir.graph(ppir.compile(ppir.load("1f1b", P=2, M=2)))
    assert nx.is_directed_acyclic_graph(lowered.wait_for())  # its data edges are dropped
    assert lowered.wait_for().number_of_edges() < lowered.number_of_edges()


@pytest.mark.parametrize("layers", ["x", 2.0, True, 0, -2])
@pytest.mark.parametrize("model", [None, "llama3-8b"])
def test_analyze_names_a_layer_count_that_is_no_positive_int_as_its_argument(layers, model):
    """Without a model, layers='x' raised "'<=' not supported between instances of 'str' and
    'int'", 2.0 was taken and True read as 'True layers do not split evenly'; layers=0 said
    '--layers must be a positive integer', the command's flag, from the library."""
    s = ppir.load("1f1b", P=2, M=2)
    with pytest.raises(ppir.PpirError) as e:
        ppir.analyze(s, model, layers=layers)
    assert (e.value.kind, e.value.message) == (
        "bad-model",
        f"layers must be a positive integer, got {layers!r}",
    )
