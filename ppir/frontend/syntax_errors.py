"""Syntax errors: lark's exceptions as ppir diagnostics, with what the user would type
("expected ')'", not RPAR), the end of file located as the parser counts lines (at ``\n``),
a note at the '{' that is never closed (read by indentation where a '}' closes an outer one),
and one at an earlier line's '(' or '[' still open where a ')' or ']' was expected.  A header
without its parameter list is pointed at where the '(' belongs; hints for '...' (a range has
two dots), for loops written as other languages write them (``while``), for ``elif``, for
``if`` where a value belongs (an expression has no conditional), for a statement's keyword
misspelt where an op's name may stand (``fro m in``), for ';' between statements
(they need no separator) and for a trailing comma (``min(a, b, )``).  A keyword glued to
what follows it (``placement vshaped``, ``ranks4``) is one word, not the keyword: lark's
contextual lexer would match the keyword as a prefix (:class:`KeywordBoundary`)."""

from __future__ import annotations

import re

from lark import Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken
from lark.lark import PostLex

from ppir.diagnostics import Note, PpirError, did_you_mean, error
from ppir.frontend.reserved import IF_VALUE
from ppir.ir import Span

# What the user types for each terminal, for "expected ..." messages.
_TERMINAL_TEXT = {
    "LPAR": "'('",
    "RPAR": "')'",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "LSQB": "'['",
    "RSQB": "']'",
    "COMMA": "','",
    "COLON": "':'",
    "EQUAL": "'='",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "STAR": "'*'",
    "PERCENT": "'%'",
    "SLASH": "'/'",
    "NAME": "a name",
    "INT": "an integer",
    "STRING": "a string in double quotes",
    "ACTION": "an action like 2F0",
    "OVERLAP": "an overlapped step like (0F3;3B1)OVERLAP_F_B",
    "CMP": "a comparison",
    "$END": "end of file",
    "__ANON_0": "'..'",
    "__ANON_1": "'//'",
}


class GluedKeyword(Exception):
    """A keyword token ``keyword`` immediately followed by a token that continues its word
    (raised by :class:`KeywordBoundary` while lark parses)."""

    def __init__(self, keyword: Token):
        super().__init__(str(keyword))
        self.keyword = keyword


class KeywordBoundary(PostLex):
    """Ends a parse at a keyword glued to the next token.  Where no name is expected (at
    the top level, after ``placement``, after ``program r``), lark's contextual lexer matches
    a keyword as the prefix of a longer word: ``vshaped`` lexes as ``vshape`` then ``d``,
    and ``ranks4`` as ``ranks 4``, which then parses.  A keyword is a word of its own."""

    def process(self, stream):
        prev = None
        for tok in stream:
            if _is_glued(prev, tok):
                raise GluedKeyword(prev)
            prev = tok
            yield tok


def _is_glued(prev: Token | None, tok: Token) -> bool:
    """Whether ``prev`` is a keyword and ``tok`` continues its word."""
    return (  # cheapest first: it runs for every token of a file
        prev is not None
        and tok.start_pos == prev.end_pos
        and tok.type != "$END"
        and prev.type not in ("NAME", "SCHEDULE_NAME")
        and prev.isidentifier()
        and _WORD.match(tok) is not None
    )


_WORD = re.compile(r"[A-Za-z0-9_]")
_WORDS = re.compile(r"[A-Za-z0-9_]+")


def _glued(keyword: Token, text: str, path: str) -> PpirError:
    """``unexpected 'vshaped'`` at the whole word the ``keyword`` token begins, with it as the
    guess (and the space it lacks when what follows is no lower-case letter: ``ranks4``)."""
    kw, line, col = str(keyword), keyword.line, keyword.column
    word = _WORDS.match(text, keyword.start_pos or 0).group(0)
    hints = [f"did you mean '{kw}'?"]
    if not word[len(kw)].islower():
        hints.append(f"a keyword is a word of its own: write '{kw} {word[len(kw) :]}'")
    span = Span(path, line, col, line, col + len(word), text)
    return error("syntax-error", f"unexpected '{word}'", span, hints=hints)


def _describe_terminal(name: str, keywords: dict[str, str]) -> str:
    if name in keywords:
        return f"'{keywords[name]}'"
    if name in _TERMINAL_TEXT:
        return _TERMINAL_TEXT[name]
    if name.isupper() and name.isalpha():
        return f"'{name.lower()}'"
    return name


def syntax_error(
    e: Exception, text: str, path: str, keywords: dict[str, str] | None = None
) -> PpirError:
    """The diagnostic for lark's ``UnexpectedCharacters``/``EOF``/``Token`` ``e``.
    ``keywords`` maps the grammar's keyword terminals to their text (``FORWARD_ONLY`` ->
    ``forward_only``): a name where keywords were expected gets the closest one as a
    did-you-mean."""
    keywords = keywords or {}
    if isinstance(e, GluedKeyword):
        return _glued(e.keyword, text, path)
    history = getattr(e, "token_history", None) or [None]
    if isinstance(e, UnexpectedToken) and _is_glued(history[-1], e.token):  # met by the lexer
        return _glued(history[-1], text, path)
    if isinstance(e, UnexpectedCharacters):
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else ""
        span = Span(path, e.line, e.column, e.line, e.column + 1, text)
        hints = []
        if ch == "/":
            hints.append("integer division is written '//'")
        elif ch == '"':
            hints.append("strings end on the same line with a closing '\"'")
        elif ch == "=":
            hints.append("compare with '==' ; bind names with 'let name = value'")
        elif ch == "." and text[max(e.pos_in_stream - 2, 0) : e.pos_in_stream] == "..":
            span = Span(path, e.line, e.column - 2, e.line, e.column + 1, text)
            return error("syntax-error", "unexpected '...'", span, hints=[_RANGE])
        elif ch == ".":
            hints.append("numbers are integers; '.' only appears in a range, 'a .. b'")
        elif ch == ";":
            hints.append(_SEMICOLON_RANK if _in_rank_line(text, e.pos_in_stream) else _SEMICOLON)
        elif ch in _OTHER_LANGUAGES:
            hints.append(_OTHER_LANGUAGES[ch])
        return error("syntax-error", f"unexpected character {ch!r}", span, hints=hints)
    tok = getattr(e, "token", None)  # an UnexpectedEOF has none; '$END' the end of file too
    at = len(text) if tok is None or tok.type == "$END" else tok.start_pos
    bare = "LPAR" in e.expected and _bare_header(text, path, at)
    if bare:
        return error(
            "syntax-error",
            f"the header 'schedule {bare[0]}' lacks its parameter list",
            bare[1],
            hints=[f"list its parameters in parentheses, '()' when there are none: {bare[2]}"],
        )
    if isinstance(e, UnexpectedEOF):
        exp = sorted({_describe_terminal(t, keywords) for t in e.expected})
        return error(
            "syntax-error",
            "unexpected end of file",
            _end(text, path),
            hints=[f"expected {_join(exp)}"],
        )
    assert isinstance(e, UnexpectedToken)
    tok = e.token
    word = _ACTION_LIKE.match(text, tok.start_pos or 0) if tok.type != "$END" else None
    if word and "ACTION" in e.expected:  # a literal rank line: an action misspelt
        w = word.group(0)
        return error(
            "syntax-error",
            f"unknown action '{w}'",
            Span(path, tok.line, tok.column, tok.line, tok.column + len(w), text),
            hints=[
                "an action is STAGE KIND MICROBATCH with KIND one of F, B, I, W, SEND_F, "
                "RECV_F, SEND_B, RECV_B (0F1, 2SEND_B0), or sREDUCE_GRAD"
            ],
        )
    if tok.type == "$END":
        span, what = _end(text, path), "end of file"
    else:
        end_col = tok.end_column or tok.column + 1
        span = Span(path, tok.line, tok.column, tok.end_line or tok.line, end_col, text)
        what = f"'{tok}'"
    exp = sorted({_describe_terminal(t, keywords) for t in e.expected})
    hints = [f"expected {_join(exp)}"] if exp else []
    if tok.type == "NAME":  # a misspelt keyword ('forward_olny', 'stagse P')
        hints[:0] = did_you_mean(str(tok), [keywords[t] for t in e.expected if t in keywords])
    loop = _LOOP_WORD.match(_line(text, tok.line)) if tok.type != "$END" else None
    prev = (getattr(e, "token_history", None) or [None])[-1]
    elif_ = _elif_word(text, tok) if tok.type != "$END" else None
    if loop:  # 'while 1 {' reads as a call of while, 'while (1) {' as a call then a block
        hints = [f"'{loop.group(1)}' is not a .pps statement: a loop is {_FOR}"]
    elif elif_:  # '} elif c {' reads as a call of elif, not as a call to fix with '(...)'
        hints = [f"'{elif_}' is not a .pps keyword: write {_ELSE_IF}"]
    elif tok.type != "$END" and _IF_AS_VALUE.search(text, 0, tok.start_pos):  # 'let x = if c'
        hints = [IF_VALUE]
    elif prev is not None and prev.type == "NAME" and set(e.expected) == {"LPAR"}:
        close = did_you_mean(str(prev), _STATEMENT_WORDS)  # 'fro m in ...': a keyword misspelt
        if close:
            span = Span(path, prev.line, prev.column, prev.line, prev.column + len(prev), text)
            what, hints = f"'{prev}'", close
        else:
            hints.append(f"'{prev}' starts a call here, its arguments in parentheses: {prev}(...)")
    elif prev is not None and prev.type == "COMMA" and tok.type in ("RPAR", "RSQB"):
        hints[:0] = ["remove the trailing comma: ',' only separates items"]
    if tok.type == "EQUAL":
        hints.append("compare with '==' (and '>=', '<=' with '=' second)")
    if tok.type == "CMP" and _after_comparison(text, tok.start_pos or 0):
        hints.insert(0, "comparisons do not chain: write 'a < b and b < c'")
    if word and _first_token(text, tok.start_pos or 0):  # a file that starts with an action
        hints.append(
            "torch.distributed.pipelining's schedules (0F0 1F0 ..., one rank per line) are "
            "read from a .csv file, or turned into .pps by 'ppir import' (which also reads "
            "them from .txt); a literal .pps program lists actions after 'rank N:'"
        )
    notes = []
    if tok.type == "$END":
        opened = _unclosed_brace(text, path)
        if opened:
            notes.append(Note("this '{' is never closed", opened))
    else:
        opened = _open_bracket(e.expected, text, path, tok)
        if opened:
            notes.append(Note(f"the '{opened[1]}' here is never closed", opened[0]))
    return error("syntax-error", f"unexpected {what}", span, hints=hints, notes=notes)


_OTHER_LANGUAGES = {  # characters other languages use for what .pps writes otherwise
    "&": "write 'and' ('a > 1 and b > 1')",
    "|": "write 'or' ('a > 1 or b > 1')",
    "!": "write 'not' for negation ('not (a > 1)'); '!=' is 'not equal'",
    "'": 'strings are written in double quotes: "..."',
}
_CHAIN = re.compile(r"(==|!=|<=|>=|<|>)[^()\[\],:]*$")


def _after_comparison(text: str, pos: int) -> bool:
    """Whether a comparison comes before ``pos`` on its line since the last bracket, comma
    or colon, and no 'and'/'or' after it: ``1 < P < 8``."""
    before = text[text.rfind("\n", 0, pos) + 1 : pos]
    m = _CHAIN.search(before)
    return m is not None and not re.search(r"\b(and|or)\b", before[m.end() :])


# The keywords that start a statement where a name starts one too (an op: 'F(m)'), so that a
# misspelt one reads as an op's name: 'fro m in 0 .. M', 'lett x = 1', 'esle {'.
_STATEMENT_WORDS = ("for", "if", "else", "let", "def", "require")
_ACTION_LIKE = re.compile(r"\d+[A-Za-z_]+\d*")
_LOOP_WORD = re.compile(r"[ \t]*(while|loop|repeat|do|until|foreach)\b")
_FOR = "'for m in 0 .. M { ... }' (m from 0 to M - 1)"
_ELIF = re.compile(r"\}\s*(elif|elsif|elseif)\b")
_ELSE_IF = "'if a { ... } else if b { ... } else { ... }'"
_IF_AS_VALUE = re.compile(
    r"(?:[=(,+\-*/%<>]|\.\.|\b(?:require|in|at|memory|priority|and|or|not))\s*\bif\s*"
    r"(?:[A-Za-z_]\w*\s*|\([^(){}]*\)\s*)?$"
)  # 'if' where a value belongs is lexed as a name: the parse fails after it, or after the
# name or the parenthesised condition that follows it (in a program, a call's start)
_RANGE = "a range is written with two dots, 'for m in 0 .. M' (m from 0 to M - 1)"
_SEMICOLON = (
    "statements need no separator: write them one after another, "
    "on one line or on separate lines ('F(m)  B(m)')"
)
_SEMICOLON_RANK = (
    "actions are separated by spaces; ';' appears only inside an overlapped step, "
    "written without spaces: (0F3;3B1)OVERLAP_F_B"
)
_RANK_LINE = re.compile(r"[ \t]*rank\b")
_HEADER = re.compile(r"([ \t]*schedule[ \t]+)([A-Za-z0-9_][A-Za-z0-9_\-]*)[ \t\r]*")


def _elif_word(text: str, tok) -> str | None:
    """'elif' (or 'elsif', 'elseif') after a '}', on ``tok``'s line or the one before it."""
    pos = tok.start_pos or 0
    line_start = text.rfind("\n", 0, pos) + 1
    start = text.rfind("\n", 0, max(line_start - 1, 0)) + 1 if line_start else 0
    found = [m.group(1) for m in _ELIF.finditer(text, start, pos)]
    return found[-1] if found else None


def _in_rank_line(text: str, pos: int) -> bool:
    """True when the line holding ``pos`` is a literal ``rank N:`` line."""
    return _RANK_LINE.match(text, text.rfind("\n", 0, pos) + 1) is not None


def _line(text: str, line: int) -> str:
    """Line ``line`` (1-based) of ``text``, lines split at ``\n`` as lark counts them."""
    lines = text.split("\n")
    return lines[line - 1] if 0 < line <= len(lines) else ""


def _bare_header(text: str, path: str, pos: int) -> tuple[str, Span, str] | None:
    """(name, the span just after it, the header as it should read) when the text before
    ``pos``, blank and comment lines dropped, ends with ``schedule NAME`` (no '(' yet)."""
    lines = text[:pos].split("\n")
    while lines and lines[-1].split("#")[0].strip() == "":
        lines.pop()
    m = _HEADER.fullmatch(lines[-1].split("#")[0]) if lines else None
    if m is None:
        return None
    col = m.end(2) + 1
    return m.group(2), Span(path, len(lines), col, len(lines), col + 1, text), f"{m[0].strip()}()"


def _first_token(text: str, pos: int) -> bool:
    """True when only blank and comment lines come before ``pos``."""
    return all(not ln.strip() or ln.lstrip().startswith("#") for ln in text[:pos].splitlines())


def _open_bracket(expected, text: str, path: str, tok) -> tuple[Span, str] | None:
    """Where a ')' or ']' was expected at ``tok``: the innermost '(' or '[' before it on an
    earlier line (on the same line the caret shows it) that the whole text never closes."""
    best = None
    for t, (a, b) in (("RPAR", "()"), ("RSQB", "[]")):
        if t not in expected:
            continue
        opened = _unclosed(text, path, a, b, (tok.line, tok.column))
        if opened is None or opened.line >= tok.line:
            continue
        if opened not in _unclosed_all(text, path, a, b):  # closed after the error: valid
            continue
        if best is None or (opened.line, opened.col) > (best[0].line, best[0].col):
            best = (opened, a)
    return best


def _end(text: str, path: str) -> Span:
    """Just after the last character of the last line (a final newline ends that line)."""
    lines = (text[:-1] if text.endswith("\n") else text).split("\n")
    n, col = len(lines), len(lines[-1].rstrip("\r")) + 1
    return Span(path, n, col, n, col + 1, text)


def _unclosed_brace(text: str, path: str) -> Span | None:
    """The '{' most plausibly lacking its '}' when the text ends with some '{' unclosed: the
    innermost of those left unclosed once each '}' that starts its line is taken to close the
    innermost open '{' on a line indented as much as it, if any (``for ... {`` then ``}`` at
    the indentation of ``program r {``: the for's '{' lacks its '}', not the program's).  None
    when every '{' is closed."""
    if not _unclosed_all(text, path, "{", "}"):
        return None
    return _unclosed_all(text, path, "{", "}", by_indent=True)[-1]  # never empty: fewer match


def _unclosed(
    text: str, path: str, open_ch: str, close_ch: str, before: tuple[int, int] | None = None
) -> Span | None:
    """The span of the innermost ``open_ch`` with no matching ``close_ch`` (comments and
    strings skipped), in the whole text or before (line, column) ``before``."""
    stack = _unclosed_all(text, path, open_ch, close_ch, before)
    return stack[-1] if stack else None


def _unclosed_all(
    text: str,
    path: str,
    open_ch: str,
    close_ch: str,
    before: tuple[int, int] | None = None,
    by_indent: bool = False,
) -> list[Span]:
    """Every ``open_ch`` left without its ``close_ch`` (see :func:`_unclosed`), outermost
    first.  ``by_indent``: a ``close_ch`` that starts its line closes the innermost open
    ``open_ch`` on a line with the same indentation, when there is one; those opened after that
    one stay unclosed (the list is then in source order)."""
    stack: list[tuple[Span, int]] = []  # each open one, with its line's indentation
    skipped: list[Span] = []  # left unclosed by a close_ch matched by indentation
    for lineno, line in enumerate(text.split("\n"), start=1):
        if before is not None and lineno > before[0]:
            break
        in_str = False
        indent = len(line) - len(line.lstrip(" \t"))
        for col, ch in enumerate(line, start=1):
            if before is not None and (lineno, col) >= before:
                break
            if ch == '"':
                in_str = not in_str
            elif in_str:
                continue
            elif ch == "#":
                break
            elif ch == open_ch:
                stack.append((Span(path, lineno, col, lineno, col + 1, text), indent))
            elif ch == close_ch and stack:
                k = len(stack) - 1
                if by_indent and col == indent + 1:
                    k = next((i for i in reversed(range(k + 1)) if stack[i][1] == indent), k)
                skipped += [span for span, _ in stack[k + 1 :]]
                del stack[k:]
    opened = [span for span, _ in stack]
    return sorted(skipped + opened, key=lambda s: (s.line, s.col)) if skipped else opened


def _join(items: list[str]) -> str:
    if len(items) > 8:
        items = items[:8] + ["..."]
    return ", ".join(items[:-1]) + (" or " if len(items) > 1 else "") + items[-1]
