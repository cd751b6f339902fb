"""Resolve a schedule argument to a Schedule: a .pps path, a torch .csv path, a ``ppir dump
--format json`` file (``ppir.program/1``), a built-in name, or ``torch:NAME``
(torch.distributed.pipelining's class NAME, built with ``-D P/M/v``).

This is the one entry point every command uses, so a user's own file and a built-in name are
accepted everywhere.
"""

from __future__ import annotations

import os
from functools import lru_cache

from ppir.diagnostics import did_you_mean, error
from ppir.frontend.expand import DEFAULT_MAX_OPS, DEFAULT_MAX_STEPS, expand
from ppir.frontend.parser import parse_text
from ppir.ir import Schedule, Span
from ppir.nogc import without_gc
from ppir.schedules import builtin_display_path, builtin_names, builtin_source


def read_text(path: str) -> str:
    """The UTF-8 text of a file; a ``bad-input`` error otherwise, located at the first byte
    that is not UTF-8 (line and column counted in the characters before it)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise error("bad-input", f"cannot read {path}: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        line_start = data.rfind(b"\n", 0, e.start) + 1
        col = len(data[line_start : e.start].decode("utf-8", "replace")) + 1
        shown = data.decode("utf-8", "replace")
        raise error(
            "bad-encoding",
            f"byte 0x{data[e.start]:02x} is not UTF-8 text ({e.reason})",
            Span(path, line, col, line, col + 1, shown),
            hints=["schedules are UTF-8 text files"],
        ) from None


def read_source(spec: str) -> tuple[str, str]:
    """(display path, text) of a .pps schedule given as a path or a built-in name."""
    if os.path.exists(spec):
        if os.path.isdir(spec):
            raise error("bad-input", f"{spec} is a directory, not a schedule file")
        return spec, read_text(spec)
    if spec in builtin_names():
        return builtin_display_path(spec), builtin_source(spec)
    looks_like_path = os.sep in spec or spec.endswith((".pps", ".csv", ".json"))
    what = "no such file" if looks_like_path else "no such file or built-in schedule"
    raise error(
        "bad-input",
        f"{what}: '{spec}'",
        hints=did_you_mean(spec, builtin_names())
        + ([] if looks_like_path else [f"built-ins: {', '.join(builtin_names())}"]),
    )


@lru_cache(maxsize=64)
def parse_cached(path: str, text: str):
    """The parsed module of a source text (the AST is immutable, so loading the same schedule
    for many parameter values, as tune and sweep do, parses it once)."""
    return parse_text(text, path)


@without_gc
def load_schedule(
    spec: str,
    params: dict[str, int] | None = None,
    *,
    placement: tuple[int, ...] | None = None,
    max_ops: int = DEFAULT_MAX_OPS,
    max_steps: int = DEFAULT_MAX_STEPS,
    define_flag: str = "-D",
) -> Schedule:
    """Parse and expand a schedule.  CSV and JSON files take no parameters; ``placement`` is for
    CSV and ``torch:NAME`` schedules; ``define_flag`` is the option parameter errors name."""
    params = dict(params or {})
    if spec.startswith("torch:"):  # torch's built-in classes; torch imported only here
        from ppir.frontend.torch_import import load_torch_builtin

        return load_torch_builtin(spec[len("torch:") :], params, placement, max_ops)
    if spec.endswith(".csv") and os.path.exists(spec):
        from ppir.frontend.csvio import read_csv_text

        _no_params(params, "a CSV schedule", define_flag)
        return read_csv_text(read_text(spec), spec, placement)
    if spec.endswith(".json") and os.path.isfile(spec):
        _no_params(params, "a JSON program", define_flag)
        _no_placement(placement, "a JSON program holds its placement")
        return read_json_program(spec)
    path, text = read_source(spec)
    _no_placement(placement, "a .pps file declares its placement with 'placement ...'")
    return expand(
        parse_cached(path, text),
        params,
        max_ops=max_ops,
        max_steps=max_steps,
        define_flag=define_flag,
    )


def _no_params(params: dict, what: str, flag: str) -> None:
    """The error for parameters given to a schedule that has none (``what``: which kind)."""
    if params:
        raise error(
            "unknown-parameter",
            f"unknown parameter '{next(iter(params))}': {what} takes no {flag} parameters",
        )


def _no_placement(placement, why: str) -> None:
    if placement is not None:
        raise error("bad-usage", f"--placement applies to CSV schedules; {why}")


def load_text(
    text: str, params: dict[str, int] | None = None, path: str = "<string>", **kw
) -> Schedule:
    """Parse and expand .pps source text (handy for tests and tools)."""
    return expand(parse_text(text, path), dict(params or {}), **kw)


def read_json_program(path: str) -> Schedule:
    """The program of a ``ppir.program/1`` JSON file (what ``ppir dump --format json``
    writes); a ppir error at the offending line and column, or naming what is malformed."""
    import json

    from ppir.ir.printer import JSON_FORMAT, from_json

    text = read_text(path)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        span = Span(path, e.lineno, e.colno, e.lineno, e.colno + 1, text)
        raise error("bad-input", f"not valid JSON: {e.msg}", span) from None
    if not isinstance(obj, dict) or obj.get("format") != JSON_FORMAT:
        got = obj.get("format") if isinstance(obj, dict) else type(obj).__name__
        raise error(
            "bad-input",
            f"{path}: not a {JSON_FORMAT} program (format: {got!r})",
            hints=["ppir reads the JSON that 'ppir dump --format json' writes"],
        )
    try:
        return from_json(obj)
    except (ValueError, KeyError, TypeError, IndexError) as e:
        what = f"missing key {e}" if isinstance(e, KeyError) else str(e)
        raise error("bad-input", f"{path}: malformed {JSON_FORMAT} program: {what}") from None
