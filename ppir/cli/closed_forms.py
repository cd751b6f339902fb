"""The closed forms people quote for a pipeline schedule's bubble, point-to-point traffic and
peak activations, with their sources: what ``ppir sweep`` prints beside its measured figures
(and says whether they agree).  Each entry is (quantity, formula text, source, value(P, M, v),
applies(P, M, v) or None for always), values exact."""

from __future__ import annotations

from fractions import Fraction


def _f(x) -> Fraction:
    return Fraction(x)


# (quantity, formula text, source, value(P, M, v), applies(P, M, v))
_BUBBLE = [
    ("bubble/ideal", "(P-1)/M", "Narayanan 2021", lambda P, M, v: _f(P - 1) / M, None),
    ("bubble/total", "(P-1)/(M+P-1)", "Huang 2019", lambda P, M, v: _f(P - 1) / (M + P - 1), None),
]
_INTERLEAVED = [
    (
        "bubble/ideal",
        "(P-1)/(v*M)",
        "Narayanan 2021 (interleaved)",
        lambda P, M, v: _f(P - 1) / (v * M),
        None,
    ),
    (
        "bubble/total",
        "(P-1)/(v*M+P-1)",
        "Narayanan 2021: (P-1)(F+B)/v idle per rank",
        lambda P, M, v: _f(P - 1) / (v * M + P - 1),
        None,
    ),
    (
        "bubble/total",
        "(P-1)/(M+v*P-1)",
        "shortcut: vP-1 fill slots per step",
        lambda P, M, v: _f(P - 1) / (M + v * P - 1),
        None,
    ),
    ("p2p fwd/mb", "v*(P-1)", "shortcut: P-1 hops a chunk", lambda P, M, v: _f(v * (P - 1)), None),
    ("p2p fwd/mb", "v*P-1", "all vP-1 boundaries cross", lambda P, M, v: _f(v * P - 1), None),
    (
        "peak A",
        "(v*P+P-1)/v",
        "Korthikanti 2023 (rank 0, M large enough)",
        lambda P, M, v: _f(v * P + P - 1) / v,
        lambda P, M, v: v * P + P - 2 < v * M,
    ),
    ("peak A", "P*(v+1)/2", "shortcut: (v+1)/2 x 1F1B", lambda P, M, v: _f(P * (v + 1)) / 2, None),
]
CLOSED_FORMS = {
    "gpipe": _BUBBLE
    + [
        ("p2p fwd/mb", "P-1", "contiguous placement", lambda P, M, v: _f(P - 1), None),
        ("peak A", "M", "GPipe: every microbatch held", lambda P, M, v: _f(M), None),
    ],
    "1f1b": _BUBBLE
    + [
        ("p2p fwd/mb", "P-1", "contiguous placement", lambda P, M, v: _f(P - 1), None),
        ("peak A", "min(P, M)", "Narayanan 2021 (rank 0)", lambda P, M, v: _f(min(P, M)), None),
    ],
    "interleaved_1f1b": _INTERLEAVED,
    # the zero-bubble paper (Qi et al., ICLR'24) at the sweep's costs F = I = W = 1; its ZB-H2
    # and ZB-V bubble (zero) is the per-stage span, not a step's idle: docs/zero-bubble.md
    "zb_h1": [
        (
            "bubble/ideal",
            "(P-1)/(3M)",
            "Qi 2024: (P-1)(F+I-W) idle, F=I=W",
            lambda P, M, v: _f(P - 1) / (3 * M),
            lambda P, M, v: M >= P,
        ),
        (
            "bubble/total",
            "(P-1)/(3M+P-1)",
            "Qi 2024: (P-1)(F+I-W) idle, F=I=W",
            lambda P, M, v: _f(P - 1) / (3 * M + P - 1),
            lambda P, M, v: M >= P,
        ),
        ("p2p fwd/mb", "P-1", "contiguous placement", lambda P, M, v: _f(P - 1), None),
        ("peak A", "min(P, M)", "Qi 2024: 1F1B's", lambda P, M, v: _f(min(P, M)), None),
    ],
    "zb_h2": [
        ("p2p fwd/mb", "P-1", "contiguous placement", lambda P, M, v: _f(P - 1), None),
        (
            "peak A",
            "2P-1",
            "Qi 2024 (M large enough)",
            lambda P, M, v: _f(2 * P - 1),
            lambda P, M, v: M >= 2 * P - 1,
        ),
    ],
    "zbv": [
        (
            "p2p fwd/mb",
            "2(P-1)",
            "V placement: the turn stays on rank P-1",
            lambda P, M, v: _f(2 * (P - 1)),
            None,
        ),
        ("peak A", "P", "Qi 2024 (M large enough)", lambda P, M, v: _f(P), lambda P, M, v: M >= P),
    ],
    "looped_bfs": [("peak A", "M", "Lamy-Poirier 2022 (about)", lambda P, M, v: _f(M), None)],
}

# torch.distributed.pipelining's classes (torch:NAME, a schedule named torch_NAME) run the
# schedules the forms above are quoted for: sweep checks torch's orders against them too.
_TORCH_CLASSES = {
    "torch_GPipe": "gpipe",
    "torch_1F1B": "1f1b",
    "torch_Interleaved1F1B": "interleaved_1f1b",
    "torch_LoopedBFS": "looped_bfs",
    "torch_ZBVZeroBubble": "zbv",
}


def closed_forms(name: str) -> list:
    """The closed forms on record for the schedule named ``name`` (a built-in's, or torch's
    class of the same schedule); empty when there are none."""
    return CLOSED_FORMS.get(_TORCH_CLASSES.get(name, name), [])
