"""Print a schedule as .pps literal text (re-parseable) and as versioned JSON.

``parse(print(s)) == s`` for every schedule: the literal form declares the header parameters,
ranks, stages, microbatches and placement, then one ``rank N:`` line per rank with groups in
square brackets.
"""

from __future__ import annotations

from .ir import Group, Schedule, item_actions, placement_name

JSON_FORMAT = "ppir.program/1"
_PER_LINE = 16


def format_pps(s: Schedule, comment: str | None = None) -> str:
    """The schedule as literal .pps text."""
    out = []
    if comment:
        out.extend(f"# {line}" for line in comment.splitlines())
    params = ", ".join(f"{k} = {v}" for k, v in s.params)
    out.append(f"schedule {s.name}({params})")
    out.append(f"ranks {s.ranks}")
    out.append(f"stages {s.stages}")
    out.append(f"microbatches {s.microbatches}")
    name = placement_name(s.ranks, s.placement)
    out.append(f"placement {name}" if name else
               "placement [" + ", ".join(str(r) for r in s.placement) + "]")
    for r, prog in enumerate(s.programs):
        words = [str(it) for it in prog]
        head = f"rank {r}:"
        if not words:
            out.append(head)
            continue
        indent = " " * (len(head) + 1)
        for i in range(0, len(words), _PER_LINE):
            chunk = " ".join(words[i:i + _PER_LINE])
            out.append(f"{head} {chunk}" if i == 0 else f"{indent}{chunk}")
    return "\n".join(out) + "\n"


def to_json(s: Schedule, compute_only: bool = False) -> dict:
    """The ``ppir.program/1`` JSON object (see README "JSON program format")."""
    if compute_only:
        s = s.compute_only()
    programs, groups = [], []
    for prog in s.programs:
        flat: list[str] = []
        spans = []
        for it in prog:
            acts = item_actions(it)
            if isinstance(it, Group):
                spans.append([len(flat), len(flat) + len(acts)])
            flat.extend(str(a) for a in acts)
        programs.append(flat)
        groups.append(spans)
    return {
        "format": JSON_FORMAT,
        "schedule": s.name,
        "params": dict(s.params),
        "ranks": s.ranks,
        "stages": s.stages,
        "microbatches": s.microbatches,
        "placement": list(s.placement),
        "lowered": s.is_lowered,
        "programs": programs,
        "groups": groups,
    }


def from_json(obj: dict) -> Schedule:
    """Inverse of :func:`to_json` (spans are not kept).  ValueError on a malformed object."""
    from .ir import Action

    if obj.get("format") != JSON_FORMAT:
        raise ValueError(f"not a {JSON_FORMAT} object (format = {obj.get('format')!r})")
    programs = []
    for flat, spans in zip(obj["programs"], obj.get("groups") or [[]] * len(obj["programs"])):
        acts = [Action.parse(t) for t in flat]
        items, i = [], 0
        for start, end in list(spans) + [[len(acts), len(acts)]]:
            items.extend(acts[i:start])
            if end > start:
                items.append(Group(tuple(acts[start:end])))
            i = end
        programs.append(tuple(items))
    return Schedule(obj["schedule"], tuple(obj["params"].items()), obj["ranks"], obj["stages"],
                    obj["microbatches"], tuple(obj["placement"]), tuple(programs))
