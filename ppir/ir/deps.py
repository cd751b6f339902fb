"""The semantics of ops: what each consumes and produces, and what crosses a stage boundary.

This module is the only place these rules are written.  The graph builder, the verifier, the
lowering, memory, the plan writer, the torch CSV writer, viz and the synthesizers ask it; none
of them re-derives a rule.

Compute ops (``(stage, kind, mb)`` keys; B runs the whole backward, I then W split it)::

    F(s, m)    consumes the activation F(s-1, m) produced          (s > 0)
    B/I(s, m)  consumes what F(s, m) kept and the gradient of the backward of (s+1, m)
    W(s, m)    consumes what I(s, m) kept

A *message* is a value that crosses one stage boundary for one microbatch: the activation
``F(s, m) -> F(s+1, m)`` or the gradient ``backward(s+1, m) -> backward(s, m)``.  When both
stages sit on the same rank it is a local hand-off; otherwise a SEND on the producer's rank
meets a RECV on the consumer's rank.  Communication actions name the stage of *their* end
(torch's convention): ``sSEND_Fm`` and ``(s+1)RECV_Fm`` carry the activation of boundary s+1,
``(s+1)SEND_Bm`` and ``sRECV_Bm`` its gradient.  The runtime names the buffer of a message
``a{b}.{m}`` (activation entering stage b) or ``g{b}.{m}`` (its gradient, leaving stage b).

"The backward of (s, m)" is whichever of B or I the schedule runs; rules that need it name
both kinds (:data:`BACKWARD`) and callers look up the one that exists.
"""

from __future__ import annotations

from typing import NamedTuple

from ppir.ir.types import Action, OpKind, Span

F, B, I, W = OpKind.F, OpKind.B, OpKind.I, OpKind.W  # noqa: E741
SEND_F, RECV_F, SEND_B, RECV_B = OpKind.SEND_F, OpKind.RECV_F, OpKind.SEND_B, OpKind.RECV_B

FORWARD = (F,)
BACKWARD = (B, I)
"""The kinds that can run "the backward of (s, m)"."""


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


# ------------------------------------------------------------------ compute ops
def inputs(a: Action, num_stages: int) -> tuple[Producer, ...]:
    """Every producer whose output compute op ``a`` consumes (those that exist in range)."""
    s, k, m = a.stage, a.kind, a.mb
    if k is F:
        return (Producer(s - 1, FORWARD, m),) if s > 0 else ()
    if k is B or k is I:
        if s + 1 < num_stages:
            return (Producer(s, FORWARD, m), Producer(s + 1, BACKWARD, m))
        return (Producer(s, FORWARD, m),)
    if k is W:
        return (Producer(s, (I,), m),)
    raise ValueError(f"{a} is not a compute action")


def message_in(a: Action, num_stages: int) -> Message | None:
    """The boundary-crossing value compute op ``a`` consumes, if any: the activation entering
    a forward's stage, or the gradient entering a backward's stage (B and I; W has none)."""
    s, k, m = a.stage, a.kind, a.mb
    if k is F:
        return Message(False, s - 1, s, m) if s > 0 else None
    if (k is B or k is I) and s + 1 < num_stages:
        return Message(True, s + 1, s, m)
    return None


def message_out(a: Action, num_stages: int) -> Message | None:
    """The boundary-crossing value compute op ``a`` produces, if any."""
    s, k, m = a.stage, a.kind, a.mb
    if k is F:
        return Message(False, s, s + 1, m) if s + 1 < num_stages else None
    if (k is B or k is I) and s > 0:
        return Message(True, s, s - 1, m)
    return None


def producer(msg: Message) -> Producer:
    """The compute op whose output ``msg`` carries."""
    return Producer(msg.src, BACKWARD if msg.grad else FORWARD, msg.mb)


def consumer(msg: Message) -> Producer:
    """The compute op that consumes ``msg``."""
    return Producer(msg.dst, BACKWARD if msg.grad else FORWARD, msg.mb)


# ------------------------------------------------------------------ communication actions
def message_of(a: Action) -> Message:
    """The value a SEND or RECV action carries."""
    s, k, m = a.stage, a.kind, a.mb
    if k is SEND_F:
        return Message(False, s, s + 1, m)
    if k is RECV_F:
        return Message(False, s - 1, s, m)
    if k is SEND_B:
        return Message(True, s, s - 1, m)
    if k is RECV_B:
        return Message(True, s + 1, s, m)
    raise ValueError(f"{a} is not a communication action")


def send_action(msg: Message, span: Span | None = None) -> Action:
    """The SEND of ``msg`` (on the producer's rank)."""
    return Action(msg.src, SEND_B if msg.grad else SEND_F, msg.mb, span)


def recv_action(msg: Message, span: Span | None = None) -> Action:
    """The RECV of ``msg`` (on the consumer's rank)."""
    return Action(msg.dst, RECV_B if msg.grad else RECV_F, msg.mb, span)


def peer_stage(a: Action) -> int:
    """The stage at the other end of a communication action."""
    msg = message_of(a)
    return msg.dst if a.kind.is_send else msg.src


def served(a: Action) -> Producer:
    """The compute op at this end of a communication action: the producer of what a SEND
    carries, the consumer of what a RECV delivers."""
    msg = message_of(a)
    return producer(msg) if a.kind.is_send else consumer(msg)


def served_keys(a: Action) -> tuple[tuple[int, OpKind, int], ...]:
    """:func:`served` as the ``(stage, kind, mb)`` keys it may be."""
    p = served(a)
    return tuple((p.stage, k, p.mb) for k in p.kinds)


def payload(a: Action) -> tuple[str, int, int, int]:
    """What a comm action carries, comparable across its two ends:
    (activation|gradient, from stage, to stage, microbatch)."""
    msg = message_of(a)
    return (msg.what, msg.src, msg.dst, msg.mb)


# ------------------------------------------------------------------ placement
def peer_rank(placement: tuple[int, ...], a: Action) -> int:
    """The rank a communication action talks to; -1 when its peer stage does not exist."""
    ps = peer_stage(a)
    return placement[ps] if 0 <= ps < len(placement) else -1


def crosses_ranks(placement: tuple[int, ...], msg: Message) -> bool:
    """True when ``msg`` needs a SEND/RECV pair (its stages sit on different ranks)."""
    return placement[msg.src] != placement[msg.dst]


def has_boundaries_across_ranks(placement: tuple[int, ...]) -> bool:
    """True when some stage boundary joins two ranks (the program then needs messages)."""
    return any(placement[s] != placement[s + 1] for s in range(len(placement) - 1))


def outgoing_message(placement: tuple[int, ...], a: Action) -> Message | None:
    """The message compute op ``a`` must send to another rank, if any."""
    msg = message_out(a, len(placement))
    return msg if msg is not None and crosses_ranks(placement, msg) else None
