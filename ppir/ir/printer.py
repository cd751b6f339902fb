"""Print a schedule as .pps literal text (re-parseable) and as versioned JSON.

``parse(print(s)) == s`` for every schedule: the literal form declares the header parameters,
ranks, stages, microbatches, pipelines (when more than one) and placement, then one ``rank N:``
line per rank with groups in square brackets.
"""

from __future__ import annotations

import re

from ppir.diagnostics import Diagnostic, PpirError, count, error
from ppir.ir import Group, Overlap, Reduce, Schedule, Wait, item_actions, placement_name

JSON_FORMAT = "ppir.program/1"
_PER_LINE = 16
SCHEDULE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-]*")
"""What the header's name may be: the grammar's ``SCHEDULE_NAME`` (a test holds them equal)."""
PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
"""What a header parameter's name may be: the grammar's ``NAME``."""


def format_pps(s: Schedule, comment: str | None = None) -> str:
    """The schedule as literal .pps text.  Its header keeps the parameters it was expanded with,
    each pinned by a ``require``: the programs below are written out for those values, so
    another ``-D`` value is an error, not a label on the same programs.  A ``bad-name`` ppir
    error when the header cannot hold the schedule's name or a parameter's (the text would not
    parse back), with a name it can hold."""
    _check_names(s)
    out = []
    if comment:
        out.extend(f"# {line}" for line in comment.splitlines())
    params = ", ".join(f"{k} = {v}" for k, v in s.params)
    out.append(f"schedule {s.name}({params})")
    for k, v in s.params:
        out.append(f'require {k} == {v} : "a literal program written out for {k} = {v}"')
    out.append(f"ranks {s.ranks}")
    out.append(f"stages {s.stages}")
    out.append(f"microbatches {s.microbatches}")
    if s.pipelines != 1:
        out.append(f"pipelines {s.pipelines}")
    if s.forward_only:
        out.append("forward_only")
    name = placement_name(s.ranks, s.placement)
    out.append(
        f"placement {name}"
        if name
        else "placement [" + ", ".join(str(r) for r in s.placement) + "]"
    )
    for r, prog in enumerate(s.programs):
        words = [str(it) for it in prog]
        head = f"rank {r}:"
        if not words:
            out.append(head)
            continue
        indent = " " * (len(head) + 1)
        for i in range(0, len(words), _PER_LINE):
            chunk = " ".join(words[i : i + _PER_LINE])
            out.append(f"{head} {chunk}" if i == 0 else f"{indent}{chunk}")
    return "\n".join(out) + "\n"


_NAMES = {  # what: (the grammar's form, the characters it does not allow, in words)
    "schedule name": (SCHEDULE_NAME, r"[^A-Za-z0-9_-]", "letters, digits, '_' and '-' (not first)"),
    "parameter name": (PARAM_NAME, r"[^A-Za-z0-9_]", "letters, digits and '_' (no digit first)"),
}


def _check_names(s: Schedule) -> None:
    """A ``bad-name`` error for a schedule or parameter name the header cannot hold."""
    for what, name in [("schedule name", s.name), *(("parameter name", k) for k, _ in s.params)]:
        pattern, other, form = _NAMES[what]
        if pattern.fullmatch(name):
            continue
        fixed = re.sub(other, "_", name)
        fixed = fixed if pattern.fullmatch(fixed) else f"s_{fixed}"  # '-' or a digit first
        raise error(
            "bad-name",
            f"the {what} {name!r} cannot be written in a .pps header, which takes {form}",
            hints=[f"rename it, e.g. to {fixed!r}"],
        )


def to_json(s: Schedule, compute_only: bool = False) -> dict:
    """The ``ppir.program/1`` JSON object (see README "JSON program format")."""
    if compute_only:
        s = s.compute_only()
    programs, groups, overlaps, posts, waits, reduces = [], [], [], [], [], []
    for prog in s.programs:
        flat: list[str] = []
        spans, ospans, rposts, rwaits, rreduces = [], [], [], [], []
        groups_in = [it.actions for it in prog if isinstance(it, Group)]
        index_of = {acts: i for i, acts in reversed(list(enumerate(groups_in)))}
        for it in prog:
            acts = item_actions(it)
            if isinstance(it, Wait):
                if it.actions not in index_of:
                    raise ValueError(f"{it} waits for no group of its rank")
                rwaits.append([len(flat), index_of[it.actions]])
            elif isinstance(it, Group):
                if it.deferred:
                    rposts.append(len(spans))
                spans.append([len(flat), len(flat) + len(acts)])
            elif isinstance(it, Overlap):
                ospans.append([len(flat), len(flat) + len(acts)])
            elif isinstance(it, Reduce):  # [position, stage, waits at that position before it]
                rreduces.append([len(flat), it.stage, sum(w[0] == len(flat) for w in rwaits)])
            flat.extend(str(a) for a in acts)
        programs.append(flat)
        groups.append(spans)
        overlaps.append(ospans)
        posts.append(rposts)
        waits.append(rwaits)
        reduces.append(rreduces)
    return {
        "format": JSON_FORMAT,
        **schedule_header(s),
        "lowered": s.is_lowered,
        "programs": programs,
        "groups": groups,
        **({"overlaps": overlaps} if any(overlaps) else {}),
        **({"deferred": posts, "waits": waits} if any(posts) or any(waits) else {}),
        **({"reduces": reduces} if any(reduces) else {}),
    }


def schedule_header(s: Schedule) -> dict:
    """The fields every JSON form of a schedule starts with (program dumps, execution plans)."""
    return {
        "schedule": s.name,
        "params": dict(s.params),
        "ranks": s.ranks,
        "stages": s.stages,
        "microbatches": s.microbatches,
        **({"pipelines": s.pipelines} if s.pipelines != 1 else {}),
        **({"forward_only": True} if s.forward_only else {}),
        "placement": list(s.placement),
    }


class MalformedProgram(PpirError, ValueError):
    """A ``ppir.program/1`` object :func:`from_json` cannot read: a ppir error (kind
    ``bad-input``, exit 2; a ValueError too), its message ``malformed ppir.program/1 program:
    ...`` naming the offending value.  ``where`` is that value's path from the top of the object
    (keys and list indices; empty for the object itself), so that a reader of a file can point
    at its line and column."""

    def __init__(self, message: str, where: tuple = ()) -> None:
        super().__init__(Diagnostic("bad-input", f"malformed {JSON_FORMAT} program: {message}"))
        self.where = tuple(where)


def field_name(where: tuple) -> str:
    """``("programs", 0, 3)`` -> ``programs[0][3]``: a JSON value's path, for messages."""
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in where).lstrip(".")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _want(ok: bool, value, what: str, where: tuple) -> None:
    if not ok:
        shown = repr(value) if len(repr(value)) <= 40 else f"a {type(value).__name__}"
        raise MalformedProgram(f"{field_name(where)} must be {what}, got {shown}", where)


def _ints(value, n: int, where: tuple, highs: tuple) -> None:
    """``value`` is a list of ``n`` integers, entry k in ``0..highs[k]`` (None: no bound)."""
    _want(isinstance(value, list) and len(value) == n, value, f"a list of {n} integers", where)
    for k, (x, hi) in enumerate(zip(value, highs)):
        bound = "at least 0" if hi is None else f"in 0..{hi}"
        _want(_is_int(x) and 0 <= x and (hi is None or x <= hi), x, bound, (*where, k))


def _per_rank(obj: dict, key: str, ranks: int) -> list:
    """The list under ``key``: one list per rank (empty lists when ``key`` is absent)."""
    value = obj.get(key)
    if value is None and key != "programs":
        return [[] for _ in range(ranks)]
    _want(isinstance(value, list), value, "a list with one list per rank", (key,))
    if len(value) != ranks:
        raise MalformedProgram(
            f"{key} holds {count(len(value), 'list')} but ranks is {ranks}", (key,)
        )
    for r, entry in enumerate(value):
        _want(isinstance(entry, list), entry, "a list", (key, r))
    return value


def check_json(obj: dict) -> None:
    """The types and internal references of a ``ppir.program/1`` object: what :func:`from_json`
    needs to build a :class:`Schedule` (integers, strings and lists where the format has them,
    one program per rank, group and position indices within the program).  Whether the
    schedule is well formed (sizes, stages and placement in range) is the reader's check, as
    for any literal program (:func:`ppir.frontend.literal.literal_shape`).  MalformedProgram
    (naming the offending value) if not."""
    if not isinstance(obj, dict):
        hint = " (json.loads(text) reads a string; ppir.load('file.json') a file)"
        raise MalformedProgram(
            f"a {JSON_FORMAT} object is a dict, got {type(obj).__name__}"
            + (hint if isinstance(obj, (str, bytes)) else "")
        )
    if obj.get("format") != JSON_FORMAT:
        raise MalformedProgram(f"not a {JSON_FORMAT} object (format = {obj.get('format')!r})")
    for key in ("schedule", "params", "ranks", "stages", "microbatches", "placement", "programs"):
        if key not in obj:
            raise MalformedProgram(f"missing key '{key}'")
    _want(isinstance(obj["schedule"], str), obj["schedule"], "a string", ("schedule",))
    params = obj["params"]
    _want(isinstance(params, dict), params, "an object of integers", ("params",))
    for k, v in params.items():
        _want(_is_int(v), v, "an integer", ("params", k))
    for key in ("ranks", "stages", "microbatches", "pipelines"):
        if key in obj:
            _want(_is_int(obj[key]), obj[key], "an integer", (key,))
    if "forward_only" in obj:
        _want(
            isinstance(obj["forward_only"], bool),
            obj["forward_only"],
            "true or false",
            ("forward_only",),
        )
    placement = obj["placement"]
    _want(isinstance(placement, list), placement, "a list of ranks", ("placement",))
    for s, r in enumerate(placement):
        _want(_is_int(r), r, "an integer", ("placement", s))
    ranks = obj["ranks"]
    programs, groups, overlaps, deferred, waits, reduces = (
        _per_rank(obj, key, ranks)
        for key in ("programs", "groups", "overlaps", "deferred", "waits", "reduces")
    )
    for r, flat in enumerate(programs):
        n, last = len(flat), len(groups[r]) - 1
        for i, t in enumerate(flat):
            _want(isinstance(t, str), t, "an action string (e.g. 2F0)", ("programs", r, i))
        for key, spans in (("groups", groups), ("overlaps", overlaps)):
            for g, span in enumerate(spans[r]):
                _ints(span, 2, (key, r, g), (n, n))
                if span[0] > span[1]:
                    raise MalformedProgram(
                        f"{field_name((key, r, g))} runs backwards, from {span[0]} to {span[1]}: "
                        f"it is [start, end] of positions in programs[{r}], end excluded",
                        (key, r, g),
                    )
        if last < 0 and (deferred[r] or waits[r]):  # "must be in 0..-1" said nothing useful
            where = ("deferred" if deferred[r] else "waits", r, 0)
            why = "the object has no 'groups'" if "groups" not in obj else f"groups[{r}] is []"
            raise MalformedProgram(
                f"{field_name(where)} names a group, but rank {r} has none ({why})", where
            )
        for g, gi in enumerate(deferred[r]):
            _want(_is_int(gi) and 0 <= gi <= last, gi, f"a group in 0..{last}", ("deferred", r, g))
        for w, wait in enumerate(waits[r]):
            _ints(wait, 2, ("waits", r, w), (n, last))
        for k, red in enumerate(reduces[r]):
            _ints(red, 3, ("reduces", r, k), (n, None, None))


def from_json(obj: dict, span=None) -> Schedule:
    """Inverse of :func:`to_json` (spans are not kept: ``span(r, i)``, when given, is the span
    of the action ``programs[r][i]``, where the JSON text has it).  MalformedProgram (a ppir
    error and a ValueError) on a malformed object (:func:`check_json`), naming where; the
    schedule is not checked further (:func:`ppir.compile` checks its shape)."""
    from ppir.ir import Action

    check_json(obj)
    programs = []
    n = len(obj["programs"])
    for r, (flat, spans, ospans) in enumerate(
        zip(obj["programs"], obj.get("groups") or [[]] * n, obj.get("overlaps") or [[]] * n)
    ):
        acts = []
        for i, t in enumerate(flat):
            try:
                acts.append(Action.parse(t, span(r, i) if span else None))
            except ValueError as e:
                raise MalformedProgram(str(e), ("programs", r, i)) from None
        deferred = set((obj.get("deferred") or [[]] * n)[r])
        waits: dict[int, list[int]] = {}
        for pos, gi in (obj.get("waits") or [[]] * n)[r]:
            waits.setdefault(pos, []).append(gi)
        for pos, stage, k in (obj.get("reduces") or [[]] * n)[r]:
            marks = waits.setdefault(pos, [])
            at, seen = 0, 0
            while at < len(marks) and (seen < k or isinstance(marks[at], Reduce)):
                seen += not isinstance(marks[at], Reduce)
                at += 1
            marks.insert(at, Reduce(stage))
        marked = sorted(
            [(a, b, "groups", gi) for gi, (a, b) in enumerate(spans)]
            + [(a, b, "overlaps", oi) for oi, (a, b) in enumerate(ospans)]
        )
        for (_, end, _, _), (start, _, key, k) in zip(marked, marked[1:]):
            if start < end:  # each program position in one group or overlapped step at most
                raise MalformedProgram(
                    f"{field_name((key, r, k))} overlaps another group or overlapped step",
                    (key, r, k),
                )
        items: list = []
        i = 0

        def emit_waits(pos: int, items=items, waits=waits, acts=acts, spans=spans) -> None:
            for gi in waits.pop(pos, ()):
                if isinstance(gi, Reduce):
                    items.append(gi)
                    continue
                a, b = spans[gi]
                items.append(Wait(tuple(acts[a:b])))

        for start, end, key, gi in marked + [(len(acts), len(acts), None, -1)]:
            for k in range(i, start):
                emit_waits(k)
                items.append(acts[k])
            emit_waits(start)
            try:  # a group of compute actions, an overlapped step that is not F then B
                if key == "groups":
                    items.append(Group(tuple(acts[start:end]), deferred=gi in deferred))
                elif key == "overlaps":
                    items.append(Overlap(tuple(acts[start:end])))
            except ValueError as e:
                raise MalformedProgram(f"{field_name((key, r, gi))}: {e}", (key, r, gi)) from None
            i = end
        programs.append(tuple(items))
    return Schedule(
        obj["schedule"],
        tuple(obj["params"].items()),
        obj["ranks"],
        obj["stages"],
        obj["microbatches"],
        tuple(obj["placement"]),
        tuple(programs),
        pipelines=obj.get("pipelines", 1),
        forward_only=obj.get("forward_only", False),
    )
