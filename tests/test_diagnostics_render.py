"""How diagnostics render: long lines as a window around the caret, repeats grouped.

The grouping is a function of the diagnostics layer (:func:`ppir.diagnostics.group_repeats`,
``Report.grouped()``, ``PpirError.render()``): checks emit one finding per instance and get
the grouping without cooperating.
"""

from __future__ import annotations

from ppir.diagnostics import Diagnostic, PpirError, Report, group_repeats, quote
from ppir.frontend.loader import load_text
from ppir.ir import Span


def _span(text: str, line: int, col: int, width: int = 3) -> Span:
    return Span("f.pps", line, col, line, col + width, text)


def test_a_short_line_is_quoted_whole():
    text = "ranks 1\nrank 0: 0F0 0B0\n"
    assert quote(_span(text, 2, 13)) == ["2 | rank 0: 0F0 0B0", "  |             ^^^"]


def test_a_long_line_is_a_window_around_the_caret():
    line = "rank 0: " + " ".join(f"0F{m} 0B{m}" for m in range(10_000))
    col = line.index("0B5000") + 1
    shown, carets = quote(_span(line + "\n", 1, col, 5))
    assert len(shown) < 120 and shown.startswith("1 | ...") and shown.endswith("...")
    assert shown[carets.index("^") :].startswith("0B5000")
    assert carets.count("^") == 5


def test_the_window_keeps_a_caret_at_either_end_of_a_long_line():
    line = "x" * 500
    first, last = quote(_span(line, 1, 1, 1)), quote(_span(line, 1, 500, 1))
    assert first[0].startswith("1 | xxx") and first[0].endswith("...") and first[1] == "  | ^"
    assert last[0].startswith("1 | ...") and last[1].index("^") == last[0].rindex("x")


def test_lines_are_counted_at_newlines_only_and_control_characters_show_as_question_marks():
    text = "a\x0cb\rc\nsecond\tline\n"
    assert quote(_span(text, 1, 3, 1)) == ["1 | a?b?c", "  |   ^"]
    assert quote(_span(text, 2, 8, 4))[0] == "2 | second line"


def test_carets_count_wide_characters_as_two_columns():
    text = 'require M > 8 : "需要" let x = 未定义\n'
    col = text.index("未") + 1
    shown, carets = quote(_span(text, 1, col, 1))
    # the caret starts where the terminal shows '未' (after two wide characters) and covers
    # both of its columns
    lead = len('require M > 8 : "') + 2 * 2 + len('" let x = ')
    assert shown == "1 | " + text.rstrip("\n") and carets == "  | " + " " * lead + "^^"
    assert quote(_span("x = 全角", 1, 5, 2))[1] == "  |     ^^^^"
    assert quote(_span("e\u0301 = y", 1, 5, 1))[1] == "  |    ^"  # a combining mark: none


def test_a_span_past_the_end_or_without_source_quotes_nothing():
    assert quote(Span("f", 1, 1, 1, 2)) == []
    assert quote(_span("one line", 3, 1)) == []


def _missing(stage: int, mb: int, span: Span) -> Diagnostic:
    return Diagnostic(
        "incomplete", f"{stage}B{mb} is missing: stage {stage} never runs microbatch {mb}", span
    )


def test_repeats_on_one_line_become_one_diagnostic_with_a_note():
    text = "ranks 1\nrank 0: 0F0\n"
    s = _span(text, 2, 9)
    diags = [_missing(0, m, s) for m in (1, 2, 3)]
    (one,) = group_repeats(diags)
    assert one.message == diags[0].message
    assert one.notes[-1].message == "the same error for 2 other microbatches: 2, 3"
    assert one.render().count("rank 0: 0F0") == 1


def test_two_varying_numbers_are_named_as_pairs():
    text = "program r { F(0) }\n"
    s = _span(text, 1, 13, 4)
    diags = [
        Diagnostic("x", f"rank {r}: microbatch {m} is never received", s)
        for r in (0, 1)
        for m in (3, 4)
    ]
    (one,) = group_repeats(diags)
    assert one.notes[-1].message == (
        "the same error for 3 other (rank, microbatch) pairs: (0, 4), (1, 3), (1, 4)"
    )


def test_only_same_kind_same_line_same_wording_groups_and_order_is_kept():
    text = "a\nb\n"
    a, b = _span(text, 1, 1, 1), _span(text, 2, 1, 1)
    diags = [
        Diagnostic("k", "rank 0 is late", a),
        Diagnostic("k", "rank 0 is early", a),  # other wording
        Diagnostic("other", "rank 1 is late", a),  # other kind
        Diagnostic("k", "rank 2 is late", b),  # other line
        Diagnostic("k", "rank 3 is late", a),
        Diagnostic("k", "no place 4"),  # no span: left alone
        Diagnostic("k", "no place 5"),
    ]
    out = group_repeats(diags)
    assert [d.message for d in out] == [
        "rank 0 is late",
        "rank 0 is early",
        "rank 1 is late",
        "rank 2 is late",
        "no place 4",
        "no place 5",
    ]
    assert out[0].notes[-1].message == "the same error for 1 other rank: 3"


def test_long_groups_list_the_first_values():
    s = _span("x\n", 1, 1, 1)
    (one,) = group_repeats([Diagnostic("k", f"stage {i} idles", s) for i in range(25)])
    assert one.notes[-1].message.endswith("9, 10, ... (14 more)")
    assert "for 24 other stages" in one.notes[-1].message


def test_the_verifier_gets_the_grouping_for_free():
    """Seven findings on one literal line print as three (grouped by wording)."""
    s = load_text("ranks 1\nmicrobatches 4\nrank 0: 0F0\n", path="inc.pps")
    from ppir.verify import verify

    report = verify(s)
    assert len(report.errors) == 7
    grouped = report.grouped()
    assert len(grouped) == 3
    assert grouped[1].notes[-1].message == "the same error for 2 other microbatches: 2, 3"
    assert report.render().count("rank 0: 0F0") == 3


def test_a_ppir_error_renders_grouped():
    s = _span("x\n", 1, 1, 1)
    err = PpirError([Diagnostic("k", f"rank {r} is late", s) for r in range(3)])
    assert err.render().count("error:") == 1 and "for 2 other ranks: 1, 2" in err.render()
    assert Report(list(err.diagnostics)).render() == err.render()


def test_the_verifier_keeps_groups_of_repeats_whole_up_to_a_bound():
    """Findings are capped per kind by printed group: 30 repeats of one line print as one
    finding that counts all 30; 300 keep 100 in the report and count the rest."""
    from ppir.verify import MAX_REPEATS, verify

    src = (
        "schedule dup(M = 30)\nranks 1\nstages 1\nmicrobatches M\nplacement looped\n"
        "program r {\n  for m in 0 .. M { F(m) F(m) B(m) }\n}\n"
    )
    [one] = verify(load_text(src, path="dup.pps")).grouped()
    assert (
        one.kind == "duplicate-op"
        and "the same error for 29 other (microbatch, step) pairs" in one.render()
    )
    many = verify(load_text(src, {"M": 300}, path="dup.pps"))
    assert len(many.diagnostics) == MAX_REPEATS + 1
    first, rest = many.grouped()
    assert f"the same error for {MAX_REPEATS - 1} other (microbatch, step) pairs" in first.render()
    assert rest.message == f"... and {300 - MAX_REPEATS} more 'duplicate-op' diagnostics"


def test_counts_and_ordinals_group_whatever_their_plural_or_thousands_commas():
    """count() writes '1 recv', '2 recvs' and '4,096 ranks', ordinal() '2nd': one wording, and
    one number each (matching.py's unmatched sends, on one rank's line)."""
    from ppir.diagnostics import count
    from ppir.verify.words import ordinal

    s = _span("x\n", 1, 1, 1)

    def unmatched(n: int, dst: int) -> Diagnostic:
        return Diagnostic(
            "unmatched-send",
            f"0SEND_F{n} on rank 0 is the {ordinal(n + 1)} send to rank {dst}, but rank "
            f"{dst} posts only {count(n, 'recv')} from rank 0",
            s,
        )

    one, big = group_repeats(
        [unmatched(1, 1), unmatched(2, 3), unmatched(4095, 5), Diagnostic("k", "4,096 of 8", s)]
    )
    assert one.message.startswith("0SEND_F1 on rank 0 is the 2nd send to rank 1")
    assert one.notes[-1].message == (
        "the same error for 2 other (microbatch, send, rank, only) tuples: "
        "(2, 3, 3, 2), (4095, 4096, 5, 4095)"
    )
    assert big.message == "4,096 of 8" and not big.notes
