"""What the profile's samples of one run say, beyond per-op times: how long messages took, how
long posting a group took, how much of an op's time it had a processor, and the trimmed mean the
cost file keeps (no torch needed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter

from ppir.ir import OpKind, deps


@dataclass
class Samples:
    """Per piece (index into the rank's pieces): lists of seconds, and sizes in bytes."""

    F: list = field(default_factory=list)
    B: list = field(default_factory=list)
    I: list = field(default_factory=list)  # noqa: E741
    W: list = field(default_factory=list)
    W_late: list = field(default_factory=list)
    FB: list = field(default_factory=list)
    F_near: list = field(default_factory=list)  # F, B and I by where their input came from
    F_far: list = field(default_factory=list)  # (position), in every order the profile ran
    B_near: list = field(default_factory=list)
    B_far: list = field(default_factory=list)
    I_near: list = field(default_factory=list)
    I_far: list = field(default_factory=list)
    activation_bytes: int = 0
    param_bytes: int = 0  # trainable parameters (those with gradients)
    frozen_bytes: int = 0  # parameters without gradients, and the module's buffers
    optimizer_bytes: int = -1  # -1: the model's optimizer could not be made here
    optimizer_error: str = ""  # why not, then: the exception's traceback
    shared: list = field(default_factory=list)  # the parameters it shares (as their lowest holder)
    out_bytes: int = 0  # the piece's output (the next piece's input) for one microbatch,
    # summed over its tensors (a tuple or dict boundary has several)
    cpu: float = 0.0  # processor seconds of the timed ops of the recorded 1F1B steps (the
    wall: float = 0.0  # op's thread), and their wall seconds: see processor_share
    near_cpu: float = 0.0  # the same of the F, B and I timed near and far, in every order
    near_wall: float = 0.0
    far_cpu: float = 0.0
    far_wall: float = 0.0


def position(kind: str, j: int, n: int) -> str | None:
    """Where the input of op ``kind`` of the ``j``-th of the ``n`` pieces a stage chains came
    from: ``"near"`` made on the rank (the F of the piece before, the B or I of the piece
    after), ``"far"`` from another rank (or the data, or the loss: the first piece's F, the
    last piece's B and I); None for W, whose input is its own I's (:func:`deps.input_side`)."""
    side = deps.input_side(OpKind[kind]) if kind in OpKind.__members__ else None
    if side is None:
        return None
    return "far" if j == (0 if side < 0 else n - 1) else "near"


def processor_share(piece: dict) -> float:
    """The share of its ops' wall time that a piece's thread had a processor: the processor
    seconds of its timed ops over their wall seconds, at most 1 (1 when nothing was timed).
    On processors shared by more busy threads than there are, the rest of the wall time was
    spent waiting for one, a stretch that the estimator's processor sharing models itself."""
    wall = piece.get("wall", 0.0)
    return min(1.0, piece.get("cpu", 0.0) / wall) if wall > 0 else 1.0


def paired_messages(groups_per_rank: list) -> list[tuple[tuple, tuple]]:
    """Both ends of every message the groups record, ``(send end, recv end)``, each end
    ``(posted, waited, done, names)`` of its group (posted: when its post returned, or began
    when the group records only that; names: the group's ``(buffer, is_recv)``).  Both ends of
    a message name the same buffer, once per step; steps are apart, so posting order pairs
    them."""
    ends: dict = {}
    for groups in groups_per_rank:
        for began, waited, done, names, *returned in groups:
            end = (returned[0] if returned else began, waited, done, names)
            for name, is_recv in names:
                ends.setdefault(name, ([], []))[is_recv].append(end)
    key = itemgetter(0)  # posting order
    return [
        pair
        for sends, recvs in ends.values()
        for pair in zip(sorted(sends, key=key), sorted(recvs, key=key))
    ]


def message_times(groups_per_rank: list) -> list[float]:
    """Seconds messages took in the run, seen from the receiving end: from the moment both ends
    had posted their groups (their posts returned; when a group records only when its post
    began, from then) to the return of the receiver's wait, for the messages whose receiver
    was already waiting then in a group of receives only (a later wait, or one that also
    waits for a send, only bounds the time from above) and was still waiting: a wait that
    returned before the sender's post did saw the message move while the post ran, and the
    timestamps do not say for how long (such a message is left out, not counted as 0 s)."""
    out = []
    for (ps, _, _, _), (pr, wr, dr, names) in paired_messages(groups_per_rank):
        ready = max(ps, pr)
        if all(r for _, r in names) and wr <= ready < dr:  # a send in the group delays its wait
            out.append(dr - ready)
    return out


def post_times(groups_per_rank: list) -> list[float]:
    """Processor seconds each group's post took in the run (``batch_isend_irecv``, the
    posting thread's time: what the rank spends, without the time it was descheduled, since
    the estimator shares the processors itself), for the groups that recorded it."""
    return [g[5] for groups in groups_per_rank for g in groups if len(g) > 5]


def post_wall_times(groups_per_rank: list) -> list[float]:
    """Wall seconds each group's post took in the run (from the call of ``batch_isend_irecv``
    to its return), for the groups that recorded it: what a rank with a processor of its own
    loses to a post, which can block (on its TCP pair's lock) or be descheduled for the
    rank's own progress thread beyond its processor time."""
    return [g[4] - g[0] for groups in groups_per_rank for g in groups if len(g) > 5]


def upper_median(xs) -> float:
    """The middle of ``xs`` in order, the upper one of two middles: one measured sample, not
    an average of two (``xs`` not empty)."""
    xs = sorted(xs)
    return xs[len(xs) // 2]


def trimmed_mean(xs: list, cut: float = 0.1) -> float:
    """The mean of ``xs`` without its top and bottom ``cut`` (0 for no samples)."""
    if not xs:
        return 0.0
    xs = sorted(xs)
    k = int(len(xs) * cut)
    core = xs[k : len(xs) - k] or xs
    return sum(core) / len(core)


def usable_cores(cores: int, ranks: int, threads: int = 1) -> int:
    """The cores a profile's ranks could keep busy: ``ranks`` processes of ``threads`` torch
    threads each on ``cores`` processors (the ``core_use`` of a cost file is a share of them)."""
    return min(cores, ranks * threads)
