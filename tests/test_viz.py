"""ppir viz: the embedded data, the self-contained page, the static charts and the CLI."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import pytest

from ppir.analysis.memory import analyze_memory
from ppir.frontend.loader import load_schedule
from ppir.viz import render_html, time_schedule
from ppir.viz.data import KINDS, run_data
from ppir.viz.html import JS_FILES, page_json


def timed(name="1f1b", **params):
    return time_schedule(load_schedule(name, params or {"P": 4, "M": 8}))


def embedded(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="ppir-data">(.*?)</script>', html, re.S)
    assert m, "no embedded data"
    return json.loads(m.group(1))


def test_run_data_matches_estimate_and_memory():
    t = timed()
    d = run_data(t.schedule, t.estimate, t.memory)
    assert d["step"] == 33 and d["ranks"] == 4 and d["label"] == "1f1b(P=4, M=8)"
    assert [len(row) for row in d["ops"]] == [5 * 16] * 4  # 8 F + 8 B per rank, 5 numbers each
    assert d["peak"] == [4, 3, 2, 1]  # 1F1B: rank r holds min(P - r, M) activations
    assert d["figures"]["bubble_total"] == pytest.approx(3 / 11)
    assert d["figures"]["peak_act"] == 4 and d["figures"]["peak_rank"] == 0
    rank1 = d["ops"][1]
    first = rank1[:5]
    assert first == [1, 2, KINDS.index("F"), 0, 1]  # F0 of stage 1 runs from 1 to 2
    # its producer is F0@s0, op 0 of rank 0 (global id base[0] + 0)
    assert d["deps"][1][:2] == [0, -1]
    mem = analyze_memory(t.schedule)
    assert d["mem"][0] == [float(x) for x in mem.per_rank[0].curve_chunks()]
    assert len(d["msgs"]) == 8 * t.estimate.message_count
    src, dst, start, end, grad, mb, src_op, dst_op = d["msgs"][:8]
    assert (src, dst, grad, mb, src_op, dst_op) == (0, 1, 0, 0, 0, 0) and start == end == 1


def test_the_page_counts_microbatches_as_compile_and_analyze_json_do(cli, tmp_path):
    """was: the viz data (ppir.viz/1) gave DualPipe at -D M=16 `microbatches` 8, one
    pipeline's count, where compile's and analyze's JSON give the step's, 16, beside
    `microbatches_per_pipeline` 8 and `pipelines` 2."""
    keys = ("microbatches", "microbatches_per_pipeline", "pipelines")
    dual = ["dualpipe", "-D", "P=4", "-D", "M=16"]
    code, out, err = cli("compile", *dual, "--backend", "cost", "--format", "json")
    assert code == 0, err
    said = {k: json.loads(out).get(k) for k in keys}
    assert said == {"microbatches": 16, "microbatches_per_pipeline": 8, "pipelines": 2}
    page = tmp_path / "d.html"
    code, _, err = cli("viz", *dual, "--compare", "1f1b", "-o", str(page))
    assert code == 0, err
    data = embedded(page.read_text())
    assert data["format"] == "ppir.viz/2"
    dualpipe, one = data["runs"]
    assert {k: dualpipe.get(k) for k in keys} == said
    assert (one["microbatches"], one["microbatches_per_pipeline"]) == (16, 16)
    assert "pipelines" not in one  # one pipeline, as compile's JSON leaves it out


def test_memory_figures_keep_every_integer_digit(cli, tmp_path):
    """Rounded to 4 significant digits, a peak of 12345 A was drawn as 12340 (and the bytes of
    a peak between 1000 and 1024 MiB as '1.02e+03 MiB')."""
    t = timed("gpipe", P=1, M=12345)  # GPipe holds every microbatch's activations
    d = run_data(t.schedule, t.estimate, t.memory)
    assert d["peak"] == [12345] and d["figures"]["peak_act"] == 12345
    assert max(d["mem"][0]) == 12345
    out = tmp_path / "m.html"
    model = "layers=8,hidden=1920,heads=16,seq=2048"  # about 1 GiB at its peak
    code, _, err = cli("viz", "1f1b", "-D", "P=4", "-D", "M=8", "--model", model, "-o", str(out))
    assert code == 0, err
    peak_bytes = embedded(out.read_text())["runs"][0]["figures"]["peak_bytes"]
    assert re.fullmatch(r"\d+(\.\d+)? [KMGT]iB", peak_bytes), peak_bytes
    from ppir.analysis.units import fmt_bytes, fmt_sig, round_sig

    assert round_sig(12345.6, 4) == 12346 and round_sig(0.012345, 3) == 0.0123
    assert [fmt_bytes(x * 2**20) for x in (1020, 1.5, 123.4)] == ["1020 MiB", "1.5 MiB", "123 MiB"]
    assert fmt_sig(2.5e-7, 4) == "0.00000025" and fmt_sig(1234.6, 2) == "1235"


def test_the_time_unit_of_pages_and_charts_is_one_forward_only_when_f_is_one():
    from ppir.analysis.config import make_config
    from ppir.viz.layout import gantt_layout

    for F, note in [
        (1, "1 unit = one forward of a full rank share"),
        (2, "the op costs' unit, in which a forward of a full rank share is 2"),
    ]:
        t = time_schedule(load_schedule("1f1b", {"P": 2, "M": 2}), make_config({"costs": {"F": F}}))
        assert run_data(t.schedule, t.estimate, t.memory)["unit_note"] == note
        label = gantt_layout(t.estimate).time_label
        assert label == f"time (units: {note.removeprefix('1 unit = ')})"
    t = time_schedule(
        load_schedule("1f1b", {"P": 2, "M": 2}), make_config({"model": {"preset": "llama3-8b"}})
    )
    assert run_data(t.schedule, t.estimate, t.memory)["unit_note"] == "times in seconds"
    assert gantt_layout(t.estimate).time_label == "time (s)"


def test_run_data_deps_point_at_producers():
    t = timed("interleaved_1f1b", P=2, M=4, v=2)
    d = run_data(t.schedule, t.estimate, t.memory)
    ops = [(r, i) for r in range(d["ranks"]) for i in range(len(d["ops"][r]) // 5)]
    for r, row in enumerate(d["deps"]):
        for i in range(len(row) // 2):
            kind, mb, stage = (d["ops"][r][5 * i + k] for k in (2, 3, 4))
            for g in row[2 * i : 2 * i + 2]:
                if g < 0:
                    continue
                pr, pi = ops[g]
                p_kind, p_mb, p_stage = (d["ops"][pr][5 * pi + k] for k in (2, 3, 4))
                assert p_mb == mb
                if KINDS[kind] == "F":
                    assert (KINDS[p_kind], p_stage) == ("F", stage - 1)
                else:
                    assert p_stage in (stage, stage + 1)
                # a producer never ends after its consumer starts
                assert d["ops"][pr][5 * pi + 1] <= d["ops"][r][5 * i]


def test_page_is_self_contained_and_embeds_both_runs():
    html = render_html(
        [timed(), timed("interleaved_1f1b", P=4, M=8, v=2)], {"view": "local", "rank": 2}
    )
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", html)
    assert "http://" not in html and "https://" not in html
    data = embedded(html)
    assert data["format"] == "ppir.viz/2" and data["initial"] == {"view": "local", "rank": 2}
    assert [r["label"] for r in data["runs"]] == [
        "1f1b(P=4, M=8)",
        "interleaved_1f1b(P=4, M=8, v=2, N=4)",
    ]
    assert data["colors"]["F"].startswith("#")  # the cost backend's palette
    for name in JS_FILES:
        assert resources.files("ppir.viz").joinpath(name).read_text()[:40] in html
    assert "<canvas" in html


def test_page_json_cannot_close_the_script_element():
    text = page_json([timed()], {"note": "</script><!--"})
    assert "</" not in text and "<!--" not in text
    assert json.loads(text)["initial"]["note"] == "</script><!--"


def test_large_schedule_data_stays_compact():
    t = timed("interleaved_1f1b", P=16, M=64, v=2)
    n_ops = sum(len(r) for r in t.estimate.ops)
    size = len(page_json([t]))
    assert size < 75 * n_ops  # flat arrays: ~5 numbers per op plus deps, memory and messages


def test_cli_writes_html_with_inherited_compare_params(cli, tmp_path):
    out = tmp_path / "cmp.html"
    code, stdout, err = cli(
        "viz",
        "1f1b",
        "-D",
        "P=4",
        "-D",
        "M=8",
        "--compare",
        "interleaved_1f1b",
        "-D2",
        "v=2",
        "-o",
        str(out),
    )
    assert code == 0, err
    assert f"wrote {out}" in stdout
    labels = [r["label"] for r in embedded(out.read_text())["runs"]]
    assert labels == ["1f1b(P=4, M=8)", "interleaved_1f1b(P=4, M=8, v=2, N=4)"]


def _page_js(html: str, *lines: str):
    """The JSON that ``lines`` write (``out``), run by Node.js after the page's own code
    (model.js, draw.js) on the page's embedded data, with the two DOM calls they make at load
    stubbed: no browser."""
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("no Node.js to run the page's layout code (apt-get install nodejs)")
    data = re.search(r'id="ppir-data">(.*?)</script>', html, re.S).group(1)
    code = "\n".join(
        [
            f"const DATA_TEXT = {json.dumps(data)};",
            "const document = { getElementById: (id) => id === 'ppir-data' ?",
            "  { textContent: DATA_TEXT } : { getBoundingClientRect: () => ({ top: 0 }) } };",
            "const window = { innerHeight: 800 };",
            *(resources.files("ppir.viz").joinpath(f).read_text() for f in JS_FILES[:2]),
            *lines,
            "process.stdout.write(JSON.stringify(out));",
        ]
    )
    done = subprocess.run([node], input=code, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _grids(html: str, views: list[tuple[str, int]]) -> list[list[dict]]:
    """Each view's panels (``rows``: how many, ``ranks``: which), from the page's layout code."""
    return _page_js(
        html,
        f"const VIEWS = {json.dumps(views)};",
        "const out = VIEWS.map(([v, r]) => layout(v, r, 1200).panels.map((p) =>",
        "  ({ rows: p.rows, ranks: p.ranks || null })));",
    )


@pytest.mark.parametrize(
    "argv, split",
    [
        (["1f1b", "-D", "P=2", "-D", "M=3"], False),
        (["interleaved_1f1b", "-D", "P=2", "-D", "M=4", "-D", "v=2"], False),
        (["1f1b", "-D", "P=2", "-D", "M=2", "-p", "forward-only,lower-comms"], False),
        (["zb_h1", "-D", "P=3", "-D", "M=4"], True),
    ],
    ids=["1f1b", "interleaved", "forward-only", "zb_h1"],
)
def test_the_activations_a_rank_holds_are_what_its_memory_curve_counts(cli, tmp_path, argv, split):
    """The side panel's list (heldAt) read the freeing rule again in JS: it listed F0 and F1
    as held by an evaluation program, whose memory curve is 0.  It now reads the ops that free
    each forward from the data (ppir.analysis.memory.released_by): at every op's end, the held
    forwards, partly freed ones aside, are the curve's chunks."""
    out = tmp_path / "v.html"
    code, _, err = cli("viz", *argv, "-o", str(out))
    assert code == 0, err
    rows = _page_js(
        out.read_text(),
        "const run = RUNS[0], out = [];",
        "for (let r = 0; r < run.ranks; r++) for (let i = 0; i < run.ends[r].length; i++) {",
        "  const t = run.ends[r][i], held = heldAt(run, r, t);",
        "  out.push([held.filter((h) => !h.partial).length,",
        "            held.filter((h) => h.partial).length, memAt(run, r, t)]);",
        "}",
    )
    assert rows
    chunk_a = 1 / int(dict(a.split("=") for a in argv if "=" in a).get("v", 1))  # P/S, in A
    for whole, partial, mem in rows:
        if not split:
            assert partial == 0 and mem == pytest.approx(whole * chunk_a), rows
        else:  # a partly freed forward counts for less than a whole one, more than nothing
            assert whole * chunk_a <= mem + 1e-9 <= (whole + partial) * chunk_a + 2e-3, rows
    assert any(whole for whole, _, _ in rows) != ("forward-only,lower-comms" in argv)


def test_a_compared_schedule_has_a_grid_of_its_own_ranks_only(cli, tmp_path):
    """1F1B at P=4 against P=2: the local view of rank 3 drew an idle row 'rank 3' and an
    empty memory plot for the P=2 schedule, which has ranks 0 and 1."""
    out = tmp_path / "cmp.html"
    code, _, err = cli("viz", "1f1b", "-D", "P=4", "-D", "M=8", "-D2", "P=2", "-o", str(out))
    assert code == 0, err
    html = out.read_text()
    runs = embedded(html)["runs"]
    assert [r["ranks"] for r in runs] == [4, 2]
    for r in runs:  # every per-rank array holds the schedule's own ranks, no padding
        per_rank = [r["ops"], r["deps"], r["mem"], r["base"], r["busy"], r["idle"], r["peak"]]
        assert {len(a) for a in per_rank} == {r["ranks"]}
    grids = _grids(html, [("global", 0), ("local", 1), ("local", 3)])
    assert [[p["rows"] for p in g] for g in grids] == [[4, 2], [1, 1], [1, 0]]
    assert [[p["ranks"] for p in g] for g in grids] == [
        [[0, 1, 2, 3], [0, 1]],
        [[1], [1]],
        [[3], []],
    ]


def test_cli_d2_alone_compares_parameter_sets(cli, tmp_path):
    out = tmp_path / "v.html"
    code, _, err = cli(
        "viz",
        "interleaved_1f1b",
        "-D",
        "P=4",
        "-D",
        "M=8",
        "-D",
        "v=2",
        "--compare-define",
        "v=4",
        "-o",
        str(out),
    )
    assert code == 0, err
    runs = embedded(out.read_text())["runs"]
    assert [r["params"]["v"] for r in runs] == [2, 4]
    assert runs[1]["step"] < runs[0]["step"]  # more chunks, smaller bubble


@pytest.mark.parametrize(
    "argv, message",
    [
        (["1f1b", "-o", "x.txt"], "cannot tell the format"),
        (["1f1b", "--compare", "nosuch"], "no such file or built-in schedule: 'nosuch'"),
        (["1f1b", "-D2", "P"], "-D2 P: expected NAME=VALUE"),
        (["1f1b", "--rank", "-1"], "--rank -1: must be 0 or more"),
        (["1f1b", "-D2", "Q=3"], "unknown parameter"),
    ],
)
def test_cli_mistakes_are_diagnostics(cli, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("viz", *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_cli_unwritable_output(cli, tmp_path):
    code, out, err = cli("viz", "1f1b", "-o", str(tmp_path / "missing" / "x.html"))
    assert code == 2 and not out and err.startswith("ppir: error: cannot write ")


@pytest.mark.parametrize("fmt, magic", [("png", b"\x89PNG"), ("svg", b"<?xml"), ("pdf", b"%PDF-")])
def test_static_formats(cli, tmp_path, fmt, magic):
    pytest.importorskip("matplotlib")
    out = tmp_path / f"chart.{fmt}"
    code, _, err = cli(
        "viz",
        "1f1b",
        "-D",
        "P=4",
        "-D",
        "M=8",
        "--compare",
        "interleaved_1f1b",
        "-D2",
        "v=2",
        "--format",
        fmt,
        "-o",
        str(out),
    )
    assert code == 0, err
    data = out.read_bytes()
    assert data.startswith(magic)
    if fmt == "svg":
        assert b"interleaved_1f1b(P=4, M=8, v=2, N=4)" in data and b"1f1b(P=4, M=8)" in data
    else:
        assert len(data) < 150_000


def test_default_output_name_follows_the_format(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, stdout, _ = cli("viz", "gpipe", "-D", "P=2", "-D", "M=2")
    assert code == 0 and (tmp_path / "gpipe.html").exists() and "gpipe.html" in stdout


def test_a_rank_the_schedule_does_not_have_is_refused(cli, tmp_path):
    out = tmp_path / "v.html"
    code, _, err = cli("viz", "1f1b", "-D", "P=4", "-D", "M=8", "--view", "local", "--rank", "9",
                       "-o", str(out))  # fmt: skip
    assert code == 2 and "--rank 9: the schedule has ranks 0..3" in err and not out.exists()


def test_page_options_with_a_chart_format_are_refused_not_ignored(cli, tmp_path):
    """--view/--mode/--rank set how the HTML page opens; a png/svg/pdf chart is the whole step of
    every rank, so they were silently dropped there."""
    out = tmp_path / "v.png"
    code, _, err = cli("viz", "1f1b", "-D", "P=4", "-D", "M=8", "--view", "local", "--rank", "2",
                       "-o", str(out))  # fmt: skip
    assert code == 2 and not out.exists()
    assert "ppir: error: --view local, --rank 2: set how the HTML page opens; a png chart draws " \
        "the whole step of every rank" in err  # fmt: skip
    assert "hint: drop them, or write HTML (-o NAME.html)" in err
    code, _, err = cli("viz", "1f1b", "-D", "P=4", "-D", "M=8", "--mode", "dynamic",
                       "--format", "svg", "-o", str(tmp_path / "v.svg"))  # fmt: skip
    assert code == 2 and "--mode dynamic: sets how the HTML page opens; an svg chart" in err
    assert "hint: drop it," in err


def test_the_page_opens_in_the_view_mode_and_rank_given(cli, tmp_path):
    out = tmp_path / "v.html"
    code, _, _ = cli("viz", "1f1b", "-D", "P=4", "-D", "M=8", "--view", "local", "--mode",
                     "dynamic", "--rank", "3", "-o", str(out))  # fmt: skip
    page = out.read_text()
    assert code == 0
    assert all(s in page for s in ('"view":"local"', '"mode":"dynamic"', '"rank":3')), page[:200]


def test_an_unknown_compare_parameter_names_the_flag_it_came_with(cli, tmp_path):
    code, _, err = cli("viz", "1f1b", "-D", "P=4", "-D", "M=8", "--compare", "interleaved_1f1b",
                       "-D2", "vv=2", "-o", str(tmp_path / "v.html"))  # fmt: skip
    assert code == 2 and "unknown parameter 'vv' (-D2 vv=2)" in err and "did you mean 'v'?" in err


@pytest.mark.parametrize(
    "d2, said",
    [
        (["-D2", "P=x"], "-D2 P=x: the value of 'P' must be an integer, got 'x'"),
        (["-D2", "P"], "-D2 P: expected NAME=VALUE, e.g. -D2 P=4"),
        (["-D2", "P=2", "-D2", "P=3"], "-D2 P=3: 'P' is already given (-D2 P=2)"),
    ],
)
def test_a_malformed_compare_parameter_names_the_flag_it_came_with(cli, tmp_path, d2, said):
    """Said '-D P=x: ...', a flag that was not given."""
    code, _, err = cli("viz", "1f1b", *d2, "-o", str(tmp_path / "v.html"))
    assert code == 2 and err.startswith(f"ppir: error: {said}\n"), err
    assert list(tmp_path.iterdir()) == []


def test_format_and_output_extension_that_disagree_are_refused(cli, tmp_path):
    out = tmp_path / "y.html"
    code, _, err = cli("viz", "1f1b", "--format", "png", "-o", str(out))
    assert code == 2 and "names a .html file but --format is png" in err
    assert not out.exists()  # it wrote a PNG into y.html


def test_default_output_name_has_no_odd_characters(cli, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("viz", "torch:GPipe", "-D", "P=2", "-D", "M=2")
    assert code == 0, err
    assert [p.name for p in tmp_path.iterdir()] == ["torch_GPipe.html"]  # was torch:GPipe.html


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("name,stage", [("x.html", "page"), ("x.svg", "chart")])
def test_drawing_shows_progress_on_a_terminal_after_the_compile(
    tmp_path, monkeypatch, capsys, name, stage
):
    # was: the compile's line only; drawing P=32, M=512, v=2 then ran ~5 s with nothing shown
    import sys

    import ppir.cli.common
    from ppir.cli import main

    monkeypatch.setattr(ppir.cli.common, "COMPILE_PROGRESS_DELAY", 0.0)  # show a fast one too
    out = tmp_path / name
    for quiet in ([], ["-q"]):
        tty = _Terminal()
        monkeypatch.setattr(sys, "stderr", tty)
        assert main(["viz", "1f1b", "-D", "P=2", "-D", "M=2", "-o", str(out), *quiet]) == 0
        assert capsys.readouterr().out == f"wrote {out}\n"
        bar = tty.getvalue()
        if quiet:
            assert bar == ""
            continue
        assert f"viz {out}: 00:00, memory" in bar and f"viz {out}: 00:00, {stage}" in bar
        assert re.search(r"\r +\r$", bar), bar[-200:]  # cleared before 'wrote'


def test_help_names_every_static_format(cli, capsys):
    # was: 'PNG and SVG draw the static Gantt chart', 'or PNG / SVG', though --format takes pdf
    with pytest.raises(SystemExit):
        cli("viz", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "PNG, SVG and PDF draw the static Gantt chart" in text
    with pytest.raises(SystemExit):
        cli("--help")
    assert "interactive HTML page, or PNG / SVG / PDF" in " ".join(capsys.readouterr().out.split())


def test_cost_assumptions_say_decimals_back_as_typed(cli, tmp_path):
    # was: 'intra latency 3/10', 'F=1/2 B=5/4', 'stage weights 3/2,1' for 0.3, 0.5, 1.25, 1.5
    from ppir.analysis.units import fmt_exact

    assert [fmt_exact(x) for x in (2, 0.5, "3/10", "5/4", "1/3", "1/1024")] == [
        "2", "0.5", "0.3", "1.25", "1/3", "0.0009765625",
    ]  # fmt: skip
    argv = ["1f1b", "-D", "P=2", "-D", "M=2", "--cost", "F=0.5,B=1.25", "--comm-latency", "0.3",
            "--inter-latency", "1/3", "--stage-weights", "1.5,1"]  # fmt: skip
    said = (
        "uniform costs F=0.5 B=1.25 I=1 W=1 per rank share (time unit: the op costs' unit, in "
        "which a forward is 0.5); stage weights 1.5,1; comm 8 ranks/node, intra latency 0.3, "
        "inter latency 1/3"
    )
    code, out, err = cli("compile", *argv, "--backend", "cost")
    assert code == 0 and f"assuming {said}\n" in out, err
    page = tmp_path / "x.html"
    assert cli("viz", *argv, "-o", str(page))[0] == 0
    assert json.dumps(said) in page.read_text()  # the header's hover


def test_a_compared_schedule_takes_the_first_ones_values_its_defaults_included(cli, tmp_path):
    """'viz mine.pps --compare v_min' drew v_min at its own defaults (P=4, M=8) beside a file
    whose header defaults were P=8, M=32: only -D values were passed on."""
    mine = tmp_path / "mine.pps"
    text = (resources.files("ppir.schedules") / "1f1b.pps").read_text()
    mine.write_text(text.replace("schedule 1f1b(P = 4, M = 8)", "schedule mine(P = 2, M = 6)"))
    out = tmp_path / "cmp.html"
    code, _, err = cli("viz", str(mine), "--compare", "interleaved_1f1b", "-o", str(out))
    assert code == 0, err
    labels = [r["label"] for r in embedded(out.read_text())["runs"]]
    assert labels == ["mine(P=2, M=6)", "interleaved_1f1b(P=2, M=6, v=2, N=2)"]


def test_chart_comm_bars_are_the_exposed_comm_the_cost_table_reports():
    """The static chart's "exposed comm" bars drew each message's whole transfer on both ranks,
    over the compute it overlaps (eager_1f1b --comm-latency 0.3: 4.8 units of pink on rank 0
    against 2.7 exposed in the table); they are now the estimator's exposed_comm, rank by rank."""
    from ppir.analysis.config import make_config
    from ppir.viz.layout import gantt_layout

    example = Path(__file__).parents[1] / "examples" / "eager_1f1b.pps"
    sched = load_schedule(str(example), {"P": 4, "M": 8})
    t = time_schedule(sched, make_config({"comm": {"latency": 0.3}}))
    bars = gantt_layout(t.estimate).bars
    for r, row in enumerate(t.estimate.per_rank):
        comm = [b for b in bars if b.row == r and b.kind == "comm"]
        assert sum(b.end - b.start for b in comm) == pytest.approx(row.exposed_comm)
        assert row.exposed_comm > 0
        for b in comm:  # never over a compute op of the rank
            assert all(b.end <= o.start or b.start >= o.end for o in t.estimate.ops[r])


def test_the_page_outlines_the_critical_path_compile_reports(cli, tmp_path):
    """The page gave the critical path only as a length in a tooltip (which equals the step
    time): nothing showed which ops are on it.  The data now lists them, the ops
    'ppir compile --backend cost' prints, and the page outlines them ('critical path')."""
    t = timed("interleaved_1f1b", P=4, M=8, v=2)
    d = run_data(t.schedule, t.estimate, t.memory)
    ids = [(r, i) for r in range(d["ranks"]) for i in range(len(d["ops"][r]) // 5)]
    on_path = [ids[g] for g in d["critical"]]
    labels = [f"{KINDS[d['ops'][r][5 * i + 2]]}{d['ops'][r][5 * i + 3]}" for r, i in on_path]
    assert labels == [f"{o.action.kind.value}{o.action.mb}" for o in t.estimate.critical_path_ops]
    assert len(on_path) == 38  # compile: "critical path 28.5 (38 ops)"
    times = [(d["ops"][r][5 * i], d["ops"][r][5 * i + 1]) for r, i in on_path]
    assert times[0][0] == 0 and times[-1][1] == d["step"]
    assert all(a[1] <= b[0] for a, b in zip(times, times[1:]))

    out = tmp_path / "p.html"
    code, _, err = cli(
        "viz", "interleaved_1f1b", "-D", "P=4", "-D", "M=8", "-D", "v=2", "-o", str(out)
    )
    assert code == 0, err
    drawn = _page_js(
        out.read_text(),
        "const rects = [], ctx = { beginPath() {}, moveTo() {}, lineTo() {}, stroke() {},",
        "  strokeRect: (...a) => rects.push(a) };",
        "const g = layout('global', 0, 1200), l = layout('local', 2, 1200);",
        "drawCritical(ctx, g, g.panels[0]); const all = rects.length;",
        "drawCritical(ctx, l, l.panels[0]);",
        "const out = { all, local: rects.length - all };",
    )
    assert drawn == {"all": 38, "local": sum(r == 2 for r, _ in on_path)}


def test_a_deadlocking_schedule_is_explained_at_its_source_line_and_nothing_written(cli, tmp_path):
    """docs/viz.md said a deadlock exits 1 'with the estimator's message'; it is ppir check's
    diagnostic: the wait-for cycle at the .pps line (file:line:col) with its hint."""
    out = tmp_path / "bad.html"
    example = Path(__file__).parents[1] / "examples" / "bad_schedule.pps"
    code, _, err = cli("viz", str(example), "--lowering", "naive", "-o", str(out))
    assert code == 1 and not out.exists()
    assert re.match(rf"{re.escape(str(example))}:\d+:\d+: error: deadlock: ranks", err), err
    assert "hint: " in err and "Traceback" not in err
    doc = (Path(__file__).parents[1] / "docs" / "viz.md").read_text()
    assert "estimator's message" not in doc and "wait-for cycle" in doc


@pytest.mark.parametrize(
    "extra, step", [([], "step 33 units"), (["--model", "llama3-8b"], "step 2.62 s")]
)
def test_the_panel_title_gives_the_step_with_its_unit(cli, tmp_path, extra, step):
    """The canvas title said 'step 33' beside the header's '33 units' (seconds had theirs)."""
    out = tmp_path / "p.html"
    code, _, err = cli("viz", "1f1b", "-D", "P=4", "-D", "M=8", *extra, "-o", str(out))
    assert code == 0, err
    titles = _page_js(
        out.read_text(),
        "const out = ['global', 'local'].map((v) => { const g = layout(v, 1, 1200);",
        "  return panelTitle(g, g.panels[0]); });",
    )
    assert titles == [f"1f1b(P=4, M=8)   {step}", f"1f1b(P=4, M=8)  \u00b7  rank 1   {step}"]
