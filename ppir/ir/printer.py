"""Print a schedule as .pps literal text (re-parseable) and as versioned JSON.

``parse(print(s)) == s`` for every schedule: the literal form declares the header parameters,
ranks, stages, microbatches, pipelines (when more than one) and placement, then one ``rank N:``
line per rank with groups in square brackets.
"""

from __future__ import annotations

from ppir.ir import Group, Overlap, Reduce, Schedule, Wait, item_actions, placement_name

JSON_FORMAT = "ppir.program/1"
_PER_LINE = 16


def format_pps(s: Schedule, comment: str | None = None) -> str:
    """The schedule as literal .pps text.  Its header keeps the parameters it was expanded with,
    each pinned by a ``require``: the programs below are written out for those values, so
    another ``-D`` value is an error, not a label on the same programs."""
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
        "placement": list(s.placement),
    }


def from_json(obj: dict) -> Schedule:
    """Inverse of :func:`to_json` (spans are not kept).  ValueError on a malformed object."""
    from ppir.ir import Action

    if obj.get("format") != JSON_FORMAT:
        raise ValueError(f"not a {JSON_FORMAT} object (format = {obj.get('format')!r})")
    programs = []
    n = len(obj["programs"])
    for r, (flat, spans, ospans) in enumerate(
        zip(obj["programs"], obj.get("groups") or [[]] * n, obj.get("overlaps") or [[]] * n)
    ):
        acts = [Action.parse(t) for t in flat]
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
            [(a, b, Group, gi) for gi, (a, b) in enumerate(spans)]
            + [(a, b, Overlap, -1) for a, b in ospans]
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

        for start, end, cls, gi in marked + [(len(acts), len(acts), None, -1)]:
            for k in range(i, start):
                emit_waits(k)
                items.append(acts[k])
            emit_waits(start)
            if cls is Group:
                items.append(Group(tuple(acts[start:end]), deferred=gi in deferred))
            elif cls is Overlap:
                items.append(Overlap(tuple(acts[start:end])))
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
    )
