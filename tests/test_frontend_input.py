"""What the front end reads: a UTF-8 byte-order mark (as Windows editors write) at the start of a
.pps, CSV, action-text or JSON file is dropped, and every position after it is the same as in
the file without it (line 1's columns count from the first real character)."""

from __future__ import annotations

import pytest

from ppir.diagnostics import PpirError
from ppir.frontend.loader import load_schedule, read_text

BOM = b"\xef\xbb\xbf"
PPS = (
    "schedule s(P = 2, M = 4)\n"
    "ranks P\n"
    "microbatches M\n"
    "program r {\n"
    "  for i in 0 .. M { F(i) }\n"
    "  for i in 0 .. M { B(i) }\n"
    "}\n"
)


def _write(tmp_path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize(
    ("name", "text"),
    [("s.pps", PPS), ("s.csv", "0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1\n")],
)
def test_a_file_with_a_byte_order_mark_loads_as_without_it(tmp_path, name, text):
    plain = load_schedule(_write(tmp_path, name, text.encode()))
    (tmp_path / "bom").mkdir()
    marked = load_schedule(_write(tmp_path / "bom", name, BOM + text.encode()))
    assert marked.programs == plain.programs and marked.placement == plain.placement


def test_only_one_byte_order_mark_is_dropped(tmp_path):
    assert read_text(_write(tmp_path, "a.pps", BOM + BOM + b"x")) == "\ufeffx"


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("dup.pps", b"schedule s(P = 2, P = 3)\n"),  # an error on line 1, after the mark
        ("late.pps", PPS.encode() + b"bogus\n"),
        ("byte.pps", b"schedule s(P = 2) \xff\n"),  # not UTF-8: located at the byte
        ("cell.csv", b"0F0,0X1\n"),
        ("bad.json", b'{"format": "ppir.program/1",\n "x": }'),
    ],
)
def test_positions_after_a_byte_order_mark_are_those_of_the_file_without_it(tmp_path, name, data):
    def where(path: str):
        with pytest.raises(PpirError) as e:
            load_schedule(path)
        d = e.value.diagnostics[0]
        return d.kind, d.message.replace(path, "F"), (d.span.line, d.span.col, d.span.end_col)

    plain = where(_write(tmp_path, name, data))
    (tmp_path / "bom").mkdir()
    assert where(_write(tmp_path / "bom", name, BOM + data)) == plain


@pytest.mark.parametrize("name", ["two.pps", "two.csv"])
def test_a_second_byte_order_mark_is_text_end_to_end(tmp_path, name):
    with pytest.raises(PpirError) as e:
        load_schedule(_write(tmp_path, name, BOM + BOM + b"0F0,0F1\n"))
    span = e.value.diagnostics[0].span
    assert (span.line, span.col) == (1, 1)  # the second mark, where the text starts


@pytest.mark.parametrize("ext", ["csv", "txt"])
def test_ppir_import_reads_a_file_with_a_byte_order_mark(tmp_path, cli, ext):
    sep = "," if ext == "csv" else " "
    path = _write(tmp_path, f"s.{ext}", BOM + f"0F0{sep}0B0\n1F0{sep}1B0\n".encode())
    code, out, err = cli("import", path)
    assert code == 0, err
    assert "rank 0: 0F0 0B0" in out and "\ufeff" not in out


def test_a_file_named_without_its_extension_is_suggested(cli, tmp_path, monkeypatch):
    """was: 'ppir check mine' beside mine.pps said "no such file or built-in schedule: 'mine'"
    with the built-ins as hints ('ppir check zb' beside zb.pps: "did you mean 'zbv'?")."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "zb.pps").write_text(PPS)
    code, out, err = cli("check", "zb")
    assert (code, out) == (2, "")
    assert err.splitlines()[:3] == [
        "ppir: error: no such file or built-in schedule: 'zb'",
        "hint: did you mean the file 'zb.pps'?",
        "hint: did you mean 'zbv'?",
    ]
    code, out, err = cli("check", str(tmp_path / "zb"))
    assert err.splitlines() == [
        f"ppir: error: no such file: '{tmp_path / 'zb'}'",
        f"hint: did you mean the file '{tmp_path / 'zb.pps'}'?",
    ]
    assert cli("check", "zb.pps")[0] == 0


def test_a_misspelt_file_path_gets_the_nearest_schedule_file_of_its_folder(cli, tmp_path):
    """'ppir check ../chimeera.pps' said only "no such file" (a misspelt built-in name gets a
    did-you-mean); the nearest .pps/.csv/.json file of that folder is now suggested, and none
    when nothing is near or the folder does not exist."""
    (tmp_path / "chimera.pps").write_text(PPS)
    (tmp_path / "notes.txt").write_text("not a schedule")
    code, out, err = cli("check", str(tmp_path / "chimeera.pps"))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"ppir: error: no such file: '{tmp_path / 'chimeera.pps'}'",
        f"hint: did you mean the file '{tmp_path / 'chimera.pps'}'?",
    ]
    for far in (tmp_path / "other.pps", tmp_path / "nodir" / "chimera.pps", tmp_path / "note.txt"):
        code, _, err = cli("check", str(far))
        assert code == 2 and "hint" not in err, err


@pytest.mark.parametrize("eol", [b"\r", b"\r\n"], ids=["cr", "crlf"])
def test_a_file_with_other_line_ends_reads_and_locates_as_with_newlines(tmp_path, eol):
    """A file whose lines end in a lone CR (classic Mac) was one line: an error on line 5 was
    reported at 1:88, quoting the whole file."""
    bad = PPS.replace("B(i)", "B(j)").encode()
    with pytest.raises(PpirError) as plain:
        load_schedule(_write(tmp_path, "s.pps", bad))
    (tmp_path / "other").mkdir()
    with pytest.raises(PpirError) as other:
        load_schedule(_write(tmp_path / "other", "s.pps", bad.replace(b"\n", eol)))
    want, got = plain.value.diagnostics[0].span, other.value.diagnostics[0].span
    assert (got.line, got.col, got.end_col) == (want.line, want.col, want.end_col) == (6, 23, 24)
    ok = load_schedule(_write(tmp_path / "other", "ok.pps", PPS.encode().replace(b"\n", eol)))
    assert ok.programs == load_schedule(_write(tmp_path, "ok.pps", PPS.encode())).programs
