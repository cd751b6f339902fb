"""Resolve a schedule argument to a Schedule: a .pps path, a torch .csv path, a ``ppir dump
--format json`` file (``ppir.program/1``), a built-in name, or ``torch:NAME``
(torch.distributed.pipelining's class NAME, built with ``-D P/M/v``).

This is the one entry point every command uses, so a user's own file and a built-in name are
accepted everywhere.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache

from ppir.diagnostics import PpirError, error
from ppir.frontend.ast import Module
from ppir.frontend.expand import (
    DEFAULT_MAX_OPS,
    DEFAULT_MAX_STEPS,
    bind_params,
    expand,
    schedule_where,
)
from ppir.frontend.json_source import json_item_spans, json_span
from ppir.frontend.keywords import check_known, keyword_typo
from ppir.frontend.literal import literal_shape
from ppir.frontend.parser import parse_text
from ppir.frontend.sources import read_source, read_text
from ppir.ir import Schedule, Span
from ppir.nogc import without_gc


@lru_cache(maxsize=64)
def parse_cached(path: str, text: str):
    """The parsed module of a source text (the AST is immutable, so loading the same schedule
    for many parameter values, as tune and sweep do, parses it once)."""
    return parse_text(text, path)


def schedule_spec(spec) -> str:
    """``spec`` as the string the loader reads: a ``str`` as it is, an ``os.PathLike`` (such as
    ``pathlib.Path``) as its path; a ``bad-input`` error naming its type for anything else."""
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str):
        raise error(
            "bad-input",
            f"the schedule (spec) must be a str or os.PathLike, got {type(spec).__name__} {spec!r}"[
                :200
            ],
            hints=["a built-in name, a .pps, .csv or .json path, or torch:NAME"],
        )
    return spec


def schedule_kind(spec: str, builtin: bool = False) -> str:
    """Which reader takes ``spec``: ``"torch"`` (``torch:NAME``), ``"csv"`` or ``"json"`` (an
    existing file with that extension, in either case: ``S.CSV`` too), else ``"pps"`` (a .pps
    path or a built-in name; always with ``builtin``: see :func:`read_source`)."""
    if builtin:
        return "pps"
    if spec.startswith("torch:"):
        return "torch"
    suffix = os.path.splitext(spec)[1].lower()
    if suffix == ".csv" and os.path.exists(spec):
        return "csv"
    if suffix == ".json" and os.path.isfile(spec):
        return "json"
    return "pps"


def declared_params(spec, *, builtin: bool = False) -> set[str]:
    """The names of the parameters a schedule takes, without expanding it (so that no
    ``require`` is checked with default values): those of ``torch:NAME``
    (:func:`ppir.frontend.torch_import.torch_params`), none for
    a CSV or JSON file, the header's for a .pps file or built-in name (``builtin``: see
    :func:`read_source`).  A ppir error when there is no such schedule or it does not parse."""
    return set(_param_names(schedule_spec(spec), builtin)[0])


def check_params(spec, params: dict, flag: str = "-D", hints=(), *, builtin: bool = False):
    """The ``unknown-parameter`` error for a name of ``params`` that ``spec`` does not take, in
    the words of every loader (:func:`ppir.frontend.keywords.check_known`), without expanding
    it: for a command that names parameters before their values are integers (``--over
    Q=1,2``, given as ``flag``, and its values' text); ``hints`` follow its own."""
    declared, where, what = _param_names(schedule_spec(spec), builtin)
    check_known(params, declared, where, flag, what, hints)


def _param_names(spec: str, builtin: bool) -> tuple[tuple[str, ...], str, str]:
    """(the parameters ``spec`` declares, how errors name it, what it is when it takes none:
    ``a CSV schedule``), as :func:`check_params` and :func:`declared_params` read them."""
    kind = schedule_kind(spec, builtin)
    if kind == "torch":  # torch itself is not imported
        from ppir.frontend.torch_import import canonical_name, torch_params, torch_where

        name = canonical_name(spec[len("torch:") :])
        return torch_params(name), torch_where(name), ""
    if kind != "pps":
        return (), spec, _FIXED[kind]
    module = parse_cached(*read_source(spec, builtin))
    names = tuple(p.name for p in module.header.params) if module.header else ()
    return names, schedule_where(module), ""


_FIXED = {"csv": "a CSV schedule", "json": "a JSON program"}  # what takes no parameters


def bound_params(spec, params: dict | None = None, *, builtin: bool = False) -> dict[str, int]:
    """The parameter values ``spec`` is expanded with: ``params`` with the defaults filled in,
    in declaration order, as the expanded schedule's ``params`` holds them, but without
    expanding (so for values a ``require`` refuses too), a default that fails to evaluate left
    out; ``params`` as given for a CSV or JSON file.  A ppir error when they cannot be bound
    (an unknown parameter, one without a default and not given)."""
    spec = schedule_spec(spec)
    kind = schedule_kind(spec, builtin)
    params = dict(params or {})
    if kind == "torch":
        from ppir.frontend.torch_import import bind_torch_params, canonical_name, torch_params

        name = canonical_name(spec[len("torch:") :])
        return dict(zip(torch_params(name), bind_torch_params(name, params)))
    if kind != "pps":
        return params
    return bind_params(parse_cached(*read_source(spec, builtin)), params, known_only=True)


@without_gc
def load_schedule(
    spec,
    params: dict[str, int] | None = None,
    *,
    placement: tuple[int, ...] | None = None,
    max_ops: int = DEFAULT_MAX_OPS,
    max_steps: int = DEFAULT_MAX_STEPS,
    define_flag: str = "-D",
    builtin: bool = False,
) -> Schedule:
    """Parse and expand a schedule (``spec``: see :func:`schedule_spec`).  CSV and JSON files
    take no parameters; ``placement`` is for CSV and ``torch:NAME`` schedules; parameter values
    must be integers (:func:`ppir.frontend.expand.integer_param`); ``define_flag`` is the
    option parameter errors name: the command line's ``-D`` (and ``--placement``), or ``""``
    for the API's words (what :func:`ppir.load` passes); ``builtin``: the built-in named
    ``spec`` whatever the working directory holds (:func:`read_source`)."""
    spec = schedule_spec(spec)
    params = dict(params or {})
    kind = schedule_kind(spec, builtin)
    option = "--placement" if define_flag else "placement"  # as the caller spells it
    if placement is not None:
        placement = _placement_arg(placement, option)
    if kind == "torch":  # torch's built-in classes; torch imported only here
        from ppir.frontend.torch_import import load_torch_builtin

        name = spec[len("torch:") :]
        return load_torch_builtin(name, params, placement, max_ops, option, define_flag)
    if kind == "csv":
        from ppir.frontend.csvio import read_csv_text

        check_known(params, (), spec, define_flag, _FIXED[kind])
        return read_csv_text(read_text(spec), spec, placement, option=option)
    if kind == "json":
        check_known(params, (), spec, define_flag, _FIXED[kind])
        _no_placement(placement, "a JSON program holds its placement", define_flag)
        return read_json_program(spec, max_ops=max_ops, max_steps=max_steps)
    path, text = read_source(spec, builtin)
    _no_placement(placement, "a .pps file declares its placement with 'placement ...'", define_flag)
    return expand(
        parse_cached(path, text),
        params,
        max_ops=max_ops,
        max_steps=max_steps,
        define_flag=define_flag,
    )


def _placement_arg(placement, option: str) -> tuple[int, ...]:
    """``placement`` as a tuple of ranks (a list is accepted); a ``bad-usage`` error naming
    ``option`` for anything else."""
    if isinstance(placement, (tuple, list)) and all(
        isinstance(r, int) and not isinstance(r, bool) for r in placement
    ):
        return tuple(placement)
    raise error(
        "bad-usage",
        f"{option} takes a tuple of ranks, one per stage, got {placement!r:.60}",
        hints=["entry s is the rank that holds stage s: (0, 1, 1, 0)"],
    )


def _no_placement(placement, why: str, define_flag: str) -> None:
    """The error for a placement given to a schedule that declares its own; it names the
    option as the caller spells it (the CLI's ``--placement``, the API's ``placement``)."""
    if placement is not None:
        name = "--placement" if define_flag else "placement"
        raise error("bad-usage", f"{name} applies to CSV and torch:NAME schedules only; {why}")


def merge_params(params: dict | None, more: dict, hints=()) -> dict:
    """The parameters given as a dict and as keywords, in one dict; a ``bad-usage`` error
    naming the parameter and both values when the two give one different values, or naming
    ``params`` when it is no dict (with the caller's ``hints``)."""
    if params is not None and not isinstance(params, dict):  # was 'not a mapping' and kin
        raise error(
            "bad-usage",
            f"params takes a dict of parameter values, such as {{'P': 4}}, got "
            f"{type(params).__name__} {params!r:.60}",
            hints=list(hints),
        )
    params = params or {}
    for name in [*params, *more]:  # an int key was a TypeError from difflib's did-you-mean
        if not isinstance(name, str):
            raise error("bad-usage", f"a parameter is named by a str, such as 'P', got {name!r}")
    for name, value in more.items():
        if params.get(name, value) != value:
            raise error(
                "bad-usage",
                f"parameter '{name}' given twice: {params[name]!r} in params and {value!r} "
                "by keyword",
                hints=["give each parameter once, in the dict or as a keyword"],
            )
    return {**params, **more}


def load_text(
    text: str,
    params: dict[str, int] | None = None,
    path: str | os.PathLike | None = "<string>",
    *,
    max_ops: int = DEFAULT_MAX_OPS,
    max_steps: int = DEFAULT_MAX_STEPS,
    **more: int,
) -> Schedule:
    """Parse and expand .pps source text (handy for tests and tools); its parameters as a
    dict, as keywords (``load_text(src, P=4, M=8)``), or both (:func:`merge_params`: one
    given both ways must have one value); ``path`` (a str or os.PathLike; None: ``<string>``)
    is the name errors give it."""
    if not isinstance(text, str):  # was a TypeError from Lark's lexer
        hint = "decode it first: text.decode('utf-8')" if isinstance(text, bytes) else None
        raise error(
            "bad-usage",
            f"load_text takes the .pps source as a str, got {type(text).__name__} {text!r:.40}",
            hints=[hint] if hint else [],
        )
    if path is None:  # the default name, as when not given
        path = "<string>"
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):  # was quoted as the file of every error: '5:12:32: error'
        raise error(
            "bad-usage",
            f"load_text's path (the name errors give the text) takes a str or os.PathLike, "
            f"got {type(path).__name__} {path!r:.40}",
        )
    module = parse_text(text, path)
    params = merge_params(params, more)
    try:
        return expand(module, params, max_ops=max_ops, max_steps=max_steps, define_flag="")
    except PpirError as e:
        known = {p.name for p in module.header.params} if module.header else set()
        raise keyword_typo(e, load_text, params, more, lambda: known) from None


# what a JSON document that is no object holds, in JSON's words
_JSON_TYPES = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def read_json_program(
    path: str, *, max_ops: int = DEFAULT_MAX_OPS, max_steps: int = DEFAULT_MAX_STEPS
) -> Schedule:
    """The program of a ``ppir.program/1`` JSON file (what ``ppir dump --format json``
    writes).  A one-line ppir error naming the file and the offending value, at its line and
    column: bad JSON, a value of the wrong type (:func:`ppir.ir.printer.check_json`), or a
    schedule that is not well formed, checked as a .pps file's literal ``rank N:`` lines are
    (:func:`ppir.frontend.literal.literal_shape`)."""
    from ppir.ir.printer import JSON_FORMAT, MalformedProgram, from_json

    text = read_text(path)
    if not text.strip():  # was 'not valid JSON: Expecting value'
        raise error(
            "bad-input",
            f"{path}: the file is empty",
            Span(path, 1, 1, 1, 2, text),
            hints=["ppir reads the JSON that 'ppir dump --format json' writes"],
        )
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        span = Span(path, e.lineno, e.colno, e.lineno, e.colno + 1, text)
        raise error("bad-input", f"not valid JSON: {e.msg}", span) from None
    except RecursionError:
        raise error("bad-input", f"{path}: not readable JSON: it nests too deeply") from None
    except ValueError as e:  # e.g. an integer longer than Python converts
        raise error("bad-input", f"{path}: not readable JSON: {e}") from None
    if not isinstance(obj, dict) or obj.get("format") != JSON_FORMAT:
        if not isinstance(obj, dict):  # a list, a number ...: no object at all
            got = f"it holds a JSON {_JSON_TYPES.get(type(obj), type(obj).__name__)}"
        else:
            got = f"format: {obj['format']!r}" if "format" in obj else "it has no 'format' key"
        from ppir.plan.build import PLAN_FORMAT

        hints = ["ppir reads the JSON that 'ppir dump --format json' writes"]
        if isinstance(obj, dict) and obj.get("format") == PLAN_FORMAT:
            n = obj.get("ranks") if isinstance(obj.get("ranks"), int) else "N"
            hints.insert(
                0,
                "it is an execution plan ('ppir compile --backend cuda'): run it with "
                f"'torchrun --nproc-per-node {n} -m ppir.run {path} --module MODULE', or give "
                "'ppir launch' the schedule it was compiled from",
            )
        raise error("bad-input", f"{path}: not a {JSON_FORMAT} program ({got})", hints=hints)

    memo: dict = {}
    ranks: dict[int, list[Span]] = {}

    def at(*where) -> Span | None:
        return json_span(path, text, where, memo)

    def action_span(r: int, i: int) -> Span:  # of programs[r][i], each rank's in one scan
        if r not in ranks:
            ranks[r] = json_item_spans(path, text, ("programs", r), memo)
        return ranks[r][i]

    try:
        s = from_json(obj, action_span)
    except MalformedProgram as e:
        span = at(*e.where) if e.where else None
        raise error("bad-input", f"{'' if span else f'{path}: '}{e.message}", span) from None
    decls = {k: (obj[k], at(k)) for k in _DECLARED if k in obj}
    decls["placement"] = (tuple(obj["placement"]), at("placement"))
    actions = [(r, a) for r in range(s.ranks) for a in s.actions(r)]
    literal_shape(Module(path, None, ()), decls, {}, actions, max_steps, max_ops)
    return s


_DECLARED = ("ranks", "stages", "microbatches", "pipelines")
