"""The semantics of ops: what each consumes and produces, and what crosses a stage boundary.

This module is the only place these rules are written.  The graph builder, the verifier, the
lowering, memory, the plan writer, the torch CSV writer, viz and the synthesizers ask it; none
of them re-derives a rule.

Compute ops (``(stage, kind, mb)`` keys; B runs the whole backward, I then W split it)::

    F(s, m)    consumes the activation F(s-1, m) produced          (s > 0)
    B/I(s, m)  consumes what F(s, m) kept and the gradient of the backward of (s+1, m)
    W(s, m)    consumes what I(s, m) kept

``REDUCE_GRAD(s)`` (:class:`ppir.ir.Reduce`) consumes the weight gradients of stage s for every
microbatch: what B(s, m), or W(s, m) when the backward is split, wrote (:func:`reduce_inputs`).

A *message* is a value that crosses one stage boundary for one microbatch: the activation
``F(s, m) -> F(s+1, m)`` or the gradient ``backward(s+1, m) -> backward(s, m)``.  When both
stages sit on the same rank it is a local hand-off; otherwise a SEND on the producer's rank
meets a RECV on the consumer's rank.  Communication actions name the stage of *their* end
(torch's convention): ``sSEND_Fm`` and ``(s+1)RECV_Fm`` carry the activation of boundary s+1,
``(s+1)SEND_Bm`` and ``sRECV_Bm`` its gradient.  The runtime names the buffer of a message
``a{b}.{m}`` (activation entering stage b) or ``g{b}.{m}`` (its gradient, leaving stage b).

"The backward of (s, m)" is whichever of B or I the schedule runs; rules that need it name
both kinds (:data:`BACKWARD`) and callers look up the one that exists.

*Pipelines*: a schedule's stages may form several independent pipelines (``pipelines`` of
them, each ``num_stages // pipelines`` consecutive stages; bidirectional DualPipe has two).
Every microbatch of a pipeline runs through that pipeline's stages only: the first stage of a
pipeline consumes no activation, its last stage sends none on, and no message crosses from one
pipeline into the next.  So "the stages an op's producers and messages may name" is the op's own
pipeline, ``stage_bounds(S, pipelines)[s]``; with one pipeline that is 0..S-1.  Every function
that needs it takes ``pipelines`` (default 1).
"""

from __future__ import annotations

from typing import NamedTuple

from ppir.ir.types import BACKWARD_KINDS, Action, OpKind, Overlap, Span

F, B, I, W = OpKind.F, OpKind.B, OpKind.I, OpKind.W  # noqa: E741
SEND_F, RECV_F, SEND_B, RECV_B = OpKind.SEND_F, OpKind.RECV_F, OpKind.SEND_B, OpKind.RECV_B

FORWARD = (F,)
BACKWARD = BACKWARD_KINDS  # (B, I), the one tuple OpKind.is_backward also reads
"""The kinds that can run "the backward of (s, m)"."""
WEIGHT_GRAD = (B, W)
"""The kinds that write the weight gradients of (s, m): B, or W when the backward is split."""
TRAINING_ONLY = frozenset((B, I, W))
"""The kinds an evaluation program (``Schedule.forward_only``) never runs: every backward."""


def forward_of(item) -> Action | None:
    """The forward a compute item runs: the action itself when it is an F, the forward half of
    an overlapped F&B step, else None (what an evaluation program keeps of a training one)."""
    a = item.actions[0] if isinstance(item, Overlap) else item
    return a if a.kind is F else None


class Producer(NamedTuple):
    """A compute op named by its stage, the kinds that may run it, and its microbatch."""

    stage: int
    kinds: tuple[OpKind, ...]
    mb: int


class Message(NamedTuple):
    """A value crossing a stage boundary: from stage ``src`` to stage ``dst`` for ``mb``;
    ``grad`` is False for an activation (``dst == src + 1``), True for a gradient."""

    grad: bool
    src: int
    dst: int
    mb: int

    @property
    def boundary(self) -> int:
        """The boundary crossed: the stage the activation enters (``max(src, dst)``)."""
        return self.dst if not self.grad else self.src

    @property
    def buffer(self) -> str:
        """The runtime's name for the value: ``a{b}.{m}`` or ``g{b}.{m}``."""
        return f"{'g' if self.grad else 'a'}{self.boundary}.{self.mb}"

    @property
    def what(self) -> str:
        return "gradient" if self.grad else "activation"

    def describe(self) -> str:
        return f"the {self.what} of microbatch {self.mb} from stage {self.src} to stage {self.dst}"


# ------------------------------------------------------------------ the rules, as tables
# Hot loops read these tables; the functions below are written with them, so each rule exists
# once.  Stage offsets are relative to the op's own stage; a producer or a message exists only
# when the stages it names lie in the op's pipeline (0..S-1 when there is one; stage_bounds).

INPUTS: dict[OpKind, tuple[tuple[int, tuple[OpKind, ...]], ...]] = {
    F: ((-1, FORWARD),),  # F(s, m) <- F(s-1, m)
    B: ((0, FORWARD), (1, BACKWARD)),  # B(s, m) <- F(s, m), backward(s+1, m)
    I: ((0, FORWARD), (1, BACKWARD)),
    W: ((0, (I,)),),  # W(s, m) <- I(s, m)
}
"""Per compute kind: (stage offset, kinds that may run it) of each producer it consumes."""

CROSSES_IN: dict[OpKind, tuple[int, bool, OpKind]] = {
    F: (-1, False, RECV_F),
    B: (1, True, RECV_B),
    I: (1, True, RECV_B),
}
"""Per compute kind with a boundary-crossing input: (offset of the stage it comes from,
gradient?, the kind of the RECV at the op's own stage that delivers it)."""

CROSSES_OUT: dict[OpKind, tuple[int, bool, OpKind]] = {
    F: (1, False, SEND_F),
    B: (-1, True, SEND_B),
    I: (-1, True, SEND_B),
}
"""Per compute kind with a boundary-crossing output: (offset of the stage it goes to,
gradient?, the kind of the SEND at the op's own stage that carries it)."""

PEER_DELTA = {SEND_F: 1, RECV_B: 1, RECV_F: -1, SEND_B: -1}
"""Per comm kind: the stage at the other end minus the action's own stage."""

SERVES: dict[OpKind, tuple[OpKind, ...]] = {
    SEND_F: FORWARD,
    RECV_F: FORWARD,
    SEND_B: BACKWARD,
    RECV_B: BACKWARD,
}
"""Per comm kind: the kinds of the compute op at this end (same stage and microbatch): the
producer of what a SEND carries, the consumer of what a RECV delivers."""


# ------------------------------------------------------------------ pipelines
def pipeline_length(num_stages: int, pipelines: int = 1) -> int:
    """Stages per pipeline: the model's stage count (the pipelines are replicas of one model)."""
    return num_stages // pipelines


def model_stage(s: int, num_stages: int, pipelines: int = 1) -> int:
    """The model stage whose parameters stage ``s`` runs: its position in its pipeline."""
    return s % pipeline_length(num_stages, pipelines)


def bounds(s: int, num_stages: int, pipelines: int = 1) -> tuple[int, int]:
    """The stages ``[lo, hi)`` of stage ``s``'s pipeline."""
    n = pipeline_length(num_stages, pipelines)
    lo = s // n * n
    return lo, lo + n


def is_last(s: int, num_stages: int, pipelines: int = 1) -> bool:
    """Stage ``s`` ends its pipeline (it computes the loss)."""
    return bounds(s, num_stages, pipelines)[1] == s + 1


def stage_bounds(num_stages: int, pipelines: int = 1) -> list[tuple[int, int]]:
    """:func:`bounds` of every stage, for hot loops."""
    return [bounds(s, num_stages, pipelines) for s in range(num_stages)]


def _within(s: int, t: int, num_stages: int, pipelines: int) -> bool:
    """Stage ``t`` lies in stage ``s``'s pipeline (``s`` itself in range)."""
    if not 0 <= s < num_stages:
        return 0 <= t < num_stages
    lo, hi = bounds(s, num_stages, pipelines)
    return lo <= t < hi


# ------------------------------------------------------------------ per-program tables
# The rules resolved once for a program's stage count and pipelines, for the hot loops (graph
# builder, verifier, memory): a loop looks an op up by ``(kind, stage)`` instead of applying a
# stage offset.  A stage out of range has no entry.


def input_table(num_stages: int, pipelines: int = 1) -> dict:
    """:func:`inputs` of each compute kind at each stage: ``(kind, stage) -> ((producer stage,
    kinds), ...)``, the producer's microbatch being the op's."""
    return {
        (k, s): tuple((s + d, ks) for d, ks in rules if _within(s, s + d, num_stages, pipelines))
        for k, rules in INPUTS.items()
        for s in range(num_stages)
    }


def crossing_table(num_stages: int, pipelines: int = 1) -> dict:
    """:func:`message_in` of each compute kind at each stage that has one: ``(kind, stage) ->
    (source stage, gradient?, RECV kind)``; the RECV delivering it is ``(stage, RECV kind, mb)``
    (:func:`recv_key`)."""
    return {
        (k, s): (s + d, grad, recv)
        for k, (d, grad, recv) in CROSSES_IN.items()
        for s in range(num_stages)
        if _within(s, s + d, num_stages, pipelines)
    }


def peer_table(num_stages: int, pipelines: int = 1) -> dict:
    """:func:`peer_stage` of each communication kind at each stage whose peer lies in its
    pipeline: ``(kind, stage) -> peer stage`` (:func:`peer_rank` is -1 for the others)."""
    return {
        (k, s): s + d
        for k, d in PEER_DELTA.items()
        for s in range(num_stages)
        if _within(s, s + d, num_stages, pipelines)
    }


# ------------------------------------------------------------------ compute ops
def inputs(a: Action, num_stages: int, pipelines: int = 1) -> tuple[Producer, ...]:
    """Every producer whose output compute op ``a`` consumes (those that exist in range)."""
    s, m = a.stage, a.mb
    rules = INPUTS.get(a.kind)
    if rules is None:
        raise ValueError(f"{a} is not a compute action")
    return tuple(
        Producer(s + d, kinds, m) for d, kinds in rules if _within(s, s + d, num_stages, pipelines)
    )


def reduce_inputs(stage: int, microbatches: int) -> tuple[Producer, ...]:
    """Every producer of the weight gradients that ``REDUCE_GRAD(stage)`` reduces."""
    return tuple(Producer(stage, WEIGHT_GRAD, m) for m in range(microbatches))


def message_in(a: Action, num_stages: int, pipelines: int = 1) -> Message | None:
    """The boundary-crossing value compute op ``a`` consumes, if any: the activation entering
    a forward's stage, or the gradient entering a backward's stage (B and I; W has none)."""
    rule = CROSSES_IN.get(a.kind)
    if rule is None or not _within(a.stage, a.stage + rule[0], num_stages, pipelines):
        return None
    return Message(rule[1], a.stage + rule[0], a.stage, a.mb)


def input_side(kind: OpKind) -> int | None:
    """Where the boundary-crossing input of a compute op of ``kind`` comes from: -1 the stage
    before (F), 1 the stage after (B and I), None when it has none (W)."""
    rule = CROSSES_IN.get(kind)
    return None if rule is None else rule[0]


def message_out(a: Action, num_stages: int, pipelines: int = 1) -> Message | None:
    """The boundary-crossing value compute op ``a`` produces, if any."""
    rule = CROSSES_OUT.get(a.kind)
    if rule is None or not _within(a.stage, a.stage + rule[0], num_stages, pipelines):
        return None
    return Message(rule[1], a.stage, a.stage + rule[0], a.mb)


def producer(msg: Message) -> Producer:
    """The compute op whose output ``msg`` carries."""
    return Producer(msg.src, BACKWARD if msg.grad else FORWARD, msg.mb)


def consumer(msg: Message) -> Producer:
    """The compute op that consumes ``msg``."""
    return Producer(msg.dst, BACKWARD if msg.grad else FORWARD, msg.mb)


# ------------------------------------------------------------------ communication actions
def message_of(a: Action) -> Message:
    """The value a SEND or RECV action carries."""
    d = PEER_DELTA.get(a.kind)
    if d is None:
        raise ValueError(f"{a} is not a communication action")
    s, peer = a.stage, a.stage + d
    grad = a.kind is SEND_B or a.kind is RECV_B
    return Message(grad, s, peer, a.mb) if a.kind.is_send else Message(grad, peer, s, a.mb)


def send_action(msg: Message, span: Span | None = None) -> Action:
    """The SEND of ``msg`` (on the producer's rank)."""
    return Action(msg.src, SEND_B if msg.grad else SEND_F, msg.mb, span)


def recv_action(msg: Message, span: Span | None = None) -> Action:
    """The RECV of ``msg`` (on the consumer's rank)."""
    return Action(msg.dst, RECV_B if msg.grad else RECV_F, msg.mb, span)


def recv_key(a: Action, num_stages: int, pipelines: int = 1) -> tuple[int, OpKind, int] | None:
    """The ``(stage, kind, mb)`` key of the RECV that delivers compute op ``a``'s
    boundary-crossing input (as :func:`recv_action` of :func:`message_in`), or None."""
    rule = CROSSES_IN.get(a.kind)
    if rule is None or not _within(a.stage, a.stage + rule[0], num_stages, pipelines):
        return None
    return (a.stage, rule[2], a.mb)


def peer_stage(a: Action) -> int:
    """The stage at the other end of a communication action."""
    return a.stage + PEER_DELTA[a.kind]


def served(a: Action) -> Producer:
    """The compute op at this end of a communication action: the producer of what a SEND
    carries, the consumer of what a RECV delivers."""
    return Producer(a.stage, SERVES[a.kind], a.mb)


def served_keys(a: Action) -> tuple[tuple[int, OpKind, int], ...]:
    """:func:`served` as the ``(stage, kind, mb)`` keys it may be."""
    s, m = a.stage, a.mb
    return tuple((s, k, m) for k in SERVES[a.kind])


def payload(a: Action) -> tuple[str, int, int, int]:
    """What a comm action carries, comparable across its two ends:
    (activation|gradient, from stage, to stage, microbatch)."""
    msg = message_of(a)
    return (msg.what, msg.src, msg.dst, msg.mb)


def payloads(actions) -> list[tuple[str, int, int, int]]:
    """:func:`payload` of every comm action of ``actions``, in one loop for the hot paths
    (:func:`message_of` is asked once per kind and stage: its microbatch is the action's)."""
    memo: dict[tuple, tuple[str, int, int]] = {}
    out = []
    add = out.append
    for a in actions:
        key = (a.kind, a.stage)
        ends = memo.get(key)
        if ends is None:
            msg = message_of(a)
            ends = memo[key] = (msg.what, msg.src, msg.dst)
        add((*ends, a.mb))
    return out


# ------------------------------------------------------------------ placement
def peer_rank(placement: tuple[int, ...], a: Action, pipelines: int = 1) -> int:
    """The rank a communication action talks to; -1 when its peer stage does not exist or lies
    in another pipeline (no message crosses from one pipeline into the next)."""
    ps, n = peer_stage(a), len(placement)
    if not 0 <= a.stage < n or not _within(a.stage, ps, n, pipelines):
        return -1
    return placement[ps]


def outgoing_messages(
    placement: tuple[int, ...], actions, pipelines: int = 1
) -> list[Message | None]:
    """:func:`outgoing_message` of every action of ``actions`` (None for comm actions), in one
    loop for the hot paths."""
    n = len(placement)
    rules, within = CROSSES_OUT, stage_bounds(n, pipelines)
    out: list[Message | None] = []
    add = out.append
    for a in actions:
        rule = rules.get(a.kind)
        if rule is None:
            add(None)
            continue
        s = a.stage
        if not 0 <= s < n:  # out of range: the general rule (_within) decides
            add(outgoing_message(placement, a, pipelines))
            continue
        t = s + rule[0]
        lo, hi = within[s]
        add(Message(rule[1], s, t, a.mb) if lo <= t < hi and placement[t] != placement[s] else None)
    return out


def crosses_ranks(placement: tuple[int, ...], msg: Message) -> bool:
    """True when ``msg`` needs a SEND/RECV pair (its stages sit on different ranks)."""
    return placement[msg.src] != placement[msg.dst]


def has_boundaries_across_ranks(placement: tuple[int, ...], pipelines: int = 1) -> bool:
    """True when some stage boundary joins two ranks (the program then needs messages)."""
    n = len(placement)
    return any(
        placement[s] != placement[s + 1] for s in range(n - 1) if _within(s, s + 1, n, pipelines)
    )


def outgoing_message(placement: tuple[int, ...], a: Action, pipelines: int = 1) -> Message | None:
    """The message compute op ``a`` must send to another rank, if any."""
    msg = message_out(a, len(placement), pipelines)
    return msg if msg is not None and crosses_ranks(placement, msg) else None
