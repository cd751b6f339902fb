"""Core IR types: actions, communication groups, per-rank programs and the schedule.

Contract
--------
* The per-rank programs held by :class:`Schedule` are the source of truth.  Everything else
  (the networkx graph in :mod:`ppir.ir.graph`, analyses, backends) is derived from them.
* All types are frozen and hashable.  Source spans are carried along but never take part in
  equality, so ``parse(print(ir)) == ir`` compares meaning, not where the text came from.
* Action text follows torch.distributed.pipelining: stage first, microbatch last, e.g. ``2F0``,
  ``1I3``, ``3SEND_F1``.  ``SEND_F`` carries the *sending* stage, ``RECV_F`` the *receiving* stage
  (the same convention as torch), so ``3SEND_F1`` on one rank matches ``4RECV_F1`` on another.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property

from ppir.ir import fast_init as _fast_init
from ppir.ir import shape as _shape


class OpKind(str, enum.Enum):
    """What an action does.  Values are the letters torch.distributed.pipelining prints."""

    F = "F"  # forward
    B = "B"  # full backward (input and weight gradients)
    I = "I"  # backward-input only  # noqa: E741
    W = "W"  # backward-weight only
    SEND_F = "SEND_F"  # send a forward activation to the next stage
    RECV_F = "RECV_F"  # receive a forward activation from the previous stage
    SEND_B = "SEND_B"  # send an input gradient to the previous stage
    RECV_B = "RECV_B"  # receive an output gradient from the next stage

    @property
    def is_compute(self) -> bool:
        return self in COMPUTE_KINDS

    @property
    def is_comm(self) -> bool:
        return not self.is_compute

    @property
    def is_send(self) -> bool:
        return self in (OpKind.SEND_F, OpKind.SEND_B)

    @property
    def is_recv(self) -> bool:
        return self in (OpKind.RECV_F, OpKind.RECV_B)

    @property
    def is_backward(self) -> bool:
        """B and I (:data:`BACKWARD_KINDS`): the ops that consume the next stage's gradient."""
        return self in BACKWARD_KINDS


COMPUTE_KINDS = frozenset({OpKind.F, OpKind.B, OpKind.I, OpKind.W})
BACKWARD_KINDS = (OpKind.B, OpKind.I)  # what runs "the backward of (s, m)": ir.deps.BACKWARD
COMM_KINDS = frozenset({OpKind.SEND_F, OpKind.RECV_F, OpKind.SEND_B, OpKind.RECV_B})
SEND_KINDS = frozenset({OpKind.SEND_F, OpKind.SEND_B})

# Longest names first so that "SEND_F" is not read as "S" + ...
_ACTION_RE = re.compile(r"^(\d+)(SEND_F|RECV_F|SEND_B|RECV_B|F|B|I|W)(\d+)$")


@dataclass(frozen=True, slots=True)
class Span:
    """A region of a source file (1-based line and column, end exclusive).

    ``source`` is the whole text of the file the span points into (shared, not copied), so a
    diagnostic can quote its line wherever it is rendered; it takes no part in ``==``."""

    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    source: str | None = field(default=None, compare=False, hash=False, repr=False)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}"


@dataclass(frozen=True, slots=True)
class Action:
    """One operation of one stage on one microbatch.

    ``span`` points at the source text that produced the action; it is ignored by ``==`` and
    ``hash``.
    """

    stage: int
    kind: OpKind
    mb: int
    span: Span | None = field(default=None, compare=False, hash=False, repr=False)

    def __str__(self) -> str:
        return f"{self.stage}{self.kind.value}{self.mb}"

    @staticmethod
    def parse(text: str, span: Span | None = None) -> Action:
        """Parse torch-style action text (``2F0``, ``3SEND_F1``); ValueError when malformed."""
        m = _ACTION_RE.match(text.strip())
        if not m:
            raise ValueError(f"not an action: {text!r} (expected e.g. 2F0, 1I3, 3SEND_F1)")
        return Action(int(m.group(1)), OpKind(m.group(2)), int(m.group(3)), span)

    @property
    def key(self) -> tuple[int, OpKind, int]:
        return (self.stage, self.kind, self.mb)

    def with_span(self, span: Span | None) -> Action:
        return Action(self.stage, self.kind, self.mb, span)


def _fast_action_init():
    """A frozen dataclass's generated ``__init__`` goes through ``object.__setattr__`` per
    field; setting the slots through their descriptors does the same work in less than half
    the time (programs hold hundreds of thousands of actions).  Behaviour is unchanged: the
    instance is still frozen afterwards."""
    ss, sk, sm, sp = (Action.__dict__[n].__set__ for n in ("stage", "kind", "mb", "span"))

    def __init__(self, stage: int, kind: OpKind, mb: int, span: Span | None = None) -> None:
        if kind.__class__ is not OpKind or stage.__class__ is not int or mb.__class__ is not int:
            stage, kind, mb = _shape.action_fields(stage, kind, mb)  # checked, or an error
        ss(self, stage)
        sk(self, kind)
        sm(self, mb)
        sp(self, span)

    Action.__init__ = __init__


_fast_action_init()


@dataclass(frozen=True, slots=True)
class Group:
    """Communication actions posted together (``batch_isend_irecv``).

    The group completes as a unit, only once every action in it has met its partner.  Actions
    in a group are all communication actions; the order inside the group is the order in which
    they are posted (and, per peer channel, the FIFO matching order).
    """

    actions: tuple[Action, ...]
    span: Span | None = field(default=None, compare=False, hash=False, repr=False)
    deferred: bool = False
    """False: the rank posts the group and waits for it right there (``[a b]``).  True: the rank
    posts it and goes on; a later :class:`Wait` with the same actions blocks until it has
    completed (``post[a b]`` ... ``wait[a b]``).  Either way the group joins the rank's FIFO of
    groups when posted."""

    def __post_init__(self) -> None:
        _shape.actions_field(self, "a Group", Action)
        for a in self.actions:
            if a.kind not in COMM_KINDS:
                raise ValueError(f"group holds a compute action {a}")

    def __str__(self) -> str:
        body = "[" + " ".join(str(a) for a in self.actions) + "]"
        return "post" + body if self.deferred else body


@dataclass(frozen=True, slots=True)
class Wait:
    """Block the rank until the deferred :class:`Group` holding ``actions`` has completed.

    A wait holds no actions of its own (``item_actions`` gives ``()``); ``actions`` names the
    group (communication actions are unique in a schedule).  Printed ``wait[a b]``."""

    actions: tuple[Action, ...]
    span: Span | None = field(default=None, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        _shape.actions_field(self, "a Wait", Action)

    def __str__(self) -> str:
        return "wait[" + " ".join(str(a) for a in self.actions) + "]"


_fast_init.install(Group, Wait, Action, COMM_KINDS)

_OVERLAP_RE = re.compile(r"^\((\d+F\d+);(\d+[BI]\d+)\)OVERLAP_F_B$")


@dataclass(frozen=True, slots=True)
class Overlap:
    """A forward and a backward (B or I) of the same rank run as ONE compute step (DualPipe's
    overlapped F&B; torch prints it ``(0F3;3B1)OVERLAP_F_B``).

    Contract: ``actions == (forward, backward)``.  The step is atomic: every input of either
    part is received before it starts and every output is sent after it ends (lower-comms, the
    verifier and the estimator treat it as one item).  Memory and the compute-order analyses see
    its parts in order, forward first.  ``span`` is ignored by ``==`` and ``hash``.
    """

    actions: tuple[Action, ...]
    span: Span | None = field(default=None, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        _shape.actions_field(self, "an Overlap", Action)
        a = self.actions
        if len(a) != 2 or a[0].kind is not OpKind.F or not a[1].kind.is_backward:
            raise ValueError(
                "an overlapped step holds one forward then one backward (B or I), "
                f"got {' '.join(str(x) for x in a)}"
            )

    def __str__(self) -> str:
        return f"({self.actions[0]};{self.actions[1]})OVERLAP_F_B"

    @staticmethod
    def parse(text: str, span: Span | None = None) -> Overlap:
        """Parse ``(0F3;3B1)OVERLAP_F_B``; ValueError when malformed."""
        m = _OVERLAP_RE.match(text.strip())
        if not m:
            raise ValueError(
                f"not an overlapped step: {text!r} (expected e.g. (0F3;3B1)OVERLAP_F_B)"
            )
        return Overlap((Action.parse(m.group(1), span), Action.parse(m.group(2), span)), span)


_REDUCE_RE = re.compile(r"^(\d+)REDUCE_GRAD$")


@dataclass(frozen=True, slots=True)
class Reduce:
    """``sREDUCE_GRAD`` (torch's REDUCE_GRAD): post the reduction of stage ``stage``'s weight
    gradients across the data-parallel replicas.

    Contract: the reduction is asynchronous -- the rank's program goes on at once, and the step
    ends only when every reduction has completed (the optimizer waits for it).  It consumes
    the weight gradients of every microbatch of its stage (:func:`ppir.ir.deps.reduce_inputs`),
    so it follows the stage's last B or W on its rank.  It holds no actions
    (``item_actions`` gives ``()``); ``span`` is ignored by ``==`` and ``hash``."""

    stage: int
    span: Span | None = field(default=None, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stage", _shape.int_field("Reduce stage", self.stage))

    def __str__(self) -> str:
        return f"{self.stage}REDUCE_GRAD"

    @staticmethod
    def parse(text: str, span: Span | None = None) -> Reduce:
        """Parse ``2REDUCE_GRAD``; ValueError when malformed."""
        m = _REDUCE_RE.match(text.strip())
        if not m:
            raise ValueError(f"not a reduce: {text!r} (expected e.g. 2REDUCE_GRAD)")
        return Reduce(int(m.group(1)), span)


Item = Action | Group | Overlap | Wait | Reduce
"""One entry of a rank's program: a compute action, a lone communication action (a group of
one), a :class:`Group` of communication actions, an :class:`Overlap` of two compute actions,
the :class:`Wait` of a deferred group, or the :class:`Reduce` of a stage's gradients."""


def item_actions(item: Item) -> tuple[Action, ...]:
    """The actions of a program item, in posting (or execution) order; ``()`` for a Wait or a
    Reduce."""
    if isinstance(item, Action):
        return (item,)
    return () if isinstance(item, (Wait, Reduce)) else item.actions


def is_comm_item(item: Item) -> bool:
    """True for a group, a lone SEND/RECV or a wait: what only a lowered program holds."""
    if isinstance(item, Action):
        return item.kind not in COMPUTE_KINDS  # OpKind.is_comm without the property call
    return isinstance(item, (Group, Wait))


def is_compute_item(item: Item) -> bool:
    """True for a compute action or an :class:`Overlap`; False for communication."""
    return isinstance(item, Overlap) or (isinstance(item, Action) and item.kind in COMPUTE_KINDS)


def parse_item(text: str, span: Span | None = None) -> Action | Overlap:
    """An action (``2F0``) or an overlapped step (``(0F3;3B1)OVERLAP_F_B``) from its text."""
    return Overlap.parse(text, span) if text.lstrip().startswith("(") else Action.parse(text, span)


@dataclass(frozen=True)
class Schedule:
    """A fully expanded pipeline schedule: one program per rank.

    ``placement[s]`` is the rank that holds virtual stage ``s``.  A rank's *local chunk* ``c`` is
    the ``c``-th smallest stage it holds.  ``params`` are the parameter values the schedule was
    expanded with (kept for printing and reports).  ``pipelines`` (default 1): the stages form
    that many independent pipelines of ``stages // pipelines`` consecutive stages, each running
    all ``microbatches`` of its own (bidirectional DualPipe: two, on a V placement); stage ``j``
    of every pipeline runs the model's stage ``j`` (:mod:`ppir.ir.deps` has the rules).
    ``forward_only``: an evaluation program (declared ``forward_only``; the ``forward-only``
    pass makes one from a training schedule): it runs every forward and no backward, and its
    forwards keep nothing for a backward.  ``empty_loops``: the loops of a ``.pps`` program
    that would emit ops but ran zero times, ``(rank, op letters, range span, why)`` each, for
    the verifier to point at when an op is missing (:func:`ppir.frontend.trips.empty_loop`),
    and ``microbatches_span`` where a ``.pps`` file declares ``microbatches`` (the same)."""

    name: str
    params: tuple[tuple[str, int], ...]
    ranks: int
    stages: int
    microbatches: int
    placement: tuple[int, ...]
    programs: tuple[tuple[Item, ...], ...]
    source: str | None = field(default=None, compare=False, hash=False)
    pipelines: int = 1
    forward_only: bool = False
    empty_loops: tuple[tuple[int, str, Span, str], ...] = field(default=(), compare=False)
    microbatches_span: Span | None = field(default=None, compare=False, hash=False)

    # ----------------------------------------------------------------- placement helpers
    @cached_property
    def stages_of_rank(self) -> tuple[tuple[int, ...], ...]:
        """For each rank, the stages it holds, ascending (index = local chunk)."""
        out: list[list[int]] = [[] for _ in range(self.ranks)]
        for s, r in enumerate(self.placement):
            out[r].append(s)
        return tuple(tuple(x) for x in out)

    def rank_of(self, stage: int) -> int:
        return self.placement[stage]

    @property
    def param_dict(self) -> dict[str, int]:
        return dict(self.params)

    # ----------------------------------------------------------------- views
    @cached_property
    def is_lowered(self) -> bool:
        """True when any program holds communication actions (the programs are tuples: read
        once)."""
        return any(is_comm_item(it) for prog in self.programs for it in prog)

    def actions(self, rank: int) -> Iterator[Action]:
        """All actions of a rank in program order, groups flattened."""
        for it in self.programs[rank]:
            yield from item_actions(it)

    def compute_actions(self, rank: int) -> list[Action]:
        return [a for a in self.actions(rank) if a.kind.is_compute]

    def compute_items(self, rank: int) -> list[Action | Overlap]:
        """A rank's compute items (actions and overlapped steps) in program order."""
        return [it for it in self.programs[rank] if is_compute_item(it)]

    def compute_only(self) -> Schedule:
        """The same schedule with every communication action removed (overlaps are kept)."""
        progs = tuple(tuple(self.compute_items(r)) for r in range(self.ranks))
        return self.replace_programs(progs)

    def replace_programs(self, programs: tuple[tuple[Item, ...], ...]) -> Schedule:
        return replace(self, programs=programs)

    @property
    def num_compute_ops(self) -> int:
        return sum(1 for r in range(self.ranks) for a in self.actions(r) if a.kind.is_compute)

    @property
    def num_ops(self) -> int:
        return sum(1 for r in range(self.ranks) for _ in self.actions(r))

    def uses_split_backward(self) -> bool:
        return any(
            a.kind in (OpKind.I, OpKind.W) for r in range(self.ranks) for a in self.actions(r)
        )


# ------------------------------------------------------------------ placements
def looped_placement(ranks: int, stages: int) -> tuple[int, ...]:
    """Stage s on rank s mod P (Megatron's interleaved placement; contiguous when S == P)."""
    return tuple(s % ranks for s in range(stages))


def vshape_placement(ranks: int, stages: int) -> tuple[int, ...]:
    """Rank r holds r and 2P-1-r, then 2P+r and 4P-1-r, ...: the pipeline folds back and forth."""
    out = []
    for s in range(stages):
        c, i = divmod(s, ranks)
        out.append(i if c % 2 == 0 else ranks - 1 - i)
    return tuple(out)


def placement_name(ranks: int, placement: tuple[int, ...]) -> str | None:
    """'looped' or 'vshape' when the placement is one of the named ones, else None."""
    if len(placement) % ranks:
        return None  # the named placements need stages divisible by ranks
    if placement == looped_placement(ranks, len(placement)):
        return "looped"
    if placement == vshape_placement(ranks, len(placement)):
        return "vshape"
    return None
