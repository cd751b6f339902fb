"""Values that cross a stage boundary: one tensor, or a tuple, list or dict of them (nested).

A *spec* describes a value's structure, dtypes and shapes as plain JSON data, identical on
every rank (it travels in the plan's ``meta`` and in the start-up metadata exchange)::

    ["t", "float32", [2, 16, 64]]                 a tensor
    ["tuple", [spec, ...]]   ["list", [spec, ...]] a sequence
    ["dict", [["key", spec], ...]]                 a mapping with string keys, in order

A value is sent as its *leaves* (tensors, in depth-first order) one message each; the gradient
of a boundary carries one tensor per floating-point leaf (:func:`message_specs`).  A stage is
called as ``module(x)`` for a tensor, ``module(*x)`` for a tuple or list and ``module(**x)``
for a dict.
"""

from __future__ import annotations

import math

import torch

from ppir.diagnostics import count

Spec = list


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def parse_dtype(name: str) -> torch.dtype:
    dt = getattr(torch, name, None) if isinstance(name, str) else None
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dt


BOUNDARY = "a value crossing a stage boundary"
BATCH = "each of make_batch's inputs and targets"


def flatten(
    value, where: str = "the value", what: str = BOUNDARY
) -> tuple[list[torch.Tensor], Spec]:
    """(leaves, spec) of a boundary value; TypeError naming ``where`` for anything else, and
    saying that ``what`` (:data:`BOUNDARY`, or :data:`BATCH` for ``make_batch``'s values) is a
    tensor or a tuple, list or dict of tensors.

    The walk is a module-level function, not a closure: a closure that calls itself is a
    reference cycle, and one holding the leaves would keep the step's tensors alive until the
    cyclic garbage collector runs (measured: a received input held past its backward)."""
    leaves: list[torch.Tensor] = []
    spec = _walk(value, "the value", where, what, leaves)
    return leaves, spec


def _walk(v, path: str, where: str, what: str, leaves: list) -> Spec:
    if isinstance(v, torch.Tensor):
        leaves.append(v)
        return ["t", dtype_name(v.dtype), list(v.shape)]
    if isinstance(v, (tuple, list)):
        kind = "tuple" if isinstance(v, tuple) else "list"
        return [kind, [_walk(x, f"{path}[{i}]", where, what, leaves) for i, x in enumerate(v)]]
    if isinstance(v, dict):
        if not all(isinstance(k, str) for k in v):
            raise TypeError(f"{where}: {path} is a dict whose keys are not all strings")
        return [
            "dict",
            [[k, _walk(x, f"{path}[{k!r}]", where, what, leaves)] for k, x in v.items()],
        ]
    hint = ""
    if v is None and path.endswith("]") and what == BOUNDARY:
        hint = (
            " (a layer that returns (hidden, None), as transformers blocks do, needs "
            "split_layers(..., call=lambda layer, x: layer(x)[0]) or a wrapper that drops it)"
        )
        if path.endswith("']"):  # a dict's value: a keyword of the next stage's call
            hint = (
                " (leave the key out of the dict, and the next stage, called as m(**x), gets "
                "the keyword's default; an attention mask that transformers' "
                "create_causal_mask gives as None, as it does for sdpa without padding, "
                "is such a value)"
            )
    raise TypeError(
        f"{where}: {path} is {type(v).__name__}; {what} is a tensor or a tuple, list or dict "
        f"of tensors{hint}"
    )


def unflatten(spec: Spec, leaves: list[torch.Tensor]):
    """Inverse of :func:`flatten` (no self-referencing closure either: see there)."""
    return _build(spec, iter(leaves))


def _build(sp: Spec, it):
    kind = sp[0]
    if kind == "t":
        return next(it)
    if kind == "tuple":
        return tuple(_build(x, it) for x in sp[1])
    if kind == "list":
        return [_build(x, it) for x in sp[1]]
    return {k: _build(x, it) for k, x in sp[1]}


def leaf_specs(spec: Spec) -> list[tuple[tuple[int, ...], torch.dtype]]:
    """(shape, dtype) of every leaf, in leaf order."""
    out: list = []

    def walk(sp: Spec) -> None:
        if sp[0] == "t":
            out.append((tuple(sp[2]), parse_dtype(sp[1])))
        elif sp[0] == "dict":
            for _, x in sp[1]:
                walk(x)
        else:
            for x in sp[1]:
                walk(x)

    walk(spec)
    return out


def check_spec(spec, where: str) -> Spec:
    """``spec`` if it is well formed (from a plan file); ValueError naming ``where``."""

    def ok(sp) -> bool:
        if not isinstance(sp, list) or not sp:
            return False
        if sp[0] == "t":
            return (
                len(sp) == 3
                and isinstance(sp[1], str)
                and isinstance(sp[2], list)
                and all(isinstance(d, int) and d >= 0 for d in sp[2])
            )
        if sp[0] in ("tuple", "list"):
            return len(sp) == 2 and isinstance(sp[1], list) and all(ok(x) for x in sp[1])
        if sp[0] == "dict":
            return (
                len(sp) == 2
                and isinstance(sp[1], list)
                and all(
                    isinstance(kv, list) and len(kv) == 2 and isinstance(kv[0], str) and ok(kv[1])
                    for kv in sp[1]
                )
            )
        return False

    if not ok(spec):
        raise ValueError(f"{where}: not a value description: {spec!r}")
    try:
        leaf_specs(spec)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    return spec


def without_dtypes(spec: Spec) -> Spec:
    """``spec`` without its dtypes: two specs that differ in dtypes alone have equal shapes."""
    if spec[0] == "t":
        return ["t", None, spec[2]]
    if spec[0] == "dict":
        return ["dict", [[k, without_dtypes(x)] for k, x in spec[1]]]
    return [spec[0], [without_dtypes(x) for x in spec[1]]]


def describe(spec: Spec) -> str:
    """Human-readable form: ``(2, 16, 64) float32``, ``((2, 3) float32, (2,) int64)``."""
    kind = spec[0]
    if kind == "t":
        return f"{tuple(spec[2])} {spec[1]}"
    if kind == "dict":
        return "{" + ", ".join(f"{k}: {describe(x)}" for k, x in spec[1]) + "}"
    inner = ", ".join(describe(x) for x in spec[1])
    return f"({inner})" if kind == "tuple" else f"[{inner}]"


def call_stage(module, value, where=None):
    """``module(x)``, ``module(*x)`` or ``module(**x)`` for a tensor, sequence or dict.  An
    exception from the module (the user's code) propagates unchanged, its traceback whole;
    with ``where`` (a function returning a text whose ``{}`` becomes the input's shapes,
    called only then) it carries that note (Python 3.11+)."""
    try:
        if isinstance(value, dict):
            return module(**value)
        if isinstance(value, (tuple, list)):
            return module(*value)
        return module(value)
    except Exception as e:
        if where is not None:
            note(e, lambda: where().format(shapes_of(value)))
        raise


def note(e: BaseException, text) -> None:
    """Add ``text()`` to ``e`` as a note (Python 3.11+), for an exception of the user's code
    that propagates unchanged; a note that fails itself is left out, not raised instead."""
    add_note = getattr(e, "add_note", None)
    if add_note is not None:
        try:
            add_note(text())
        except Exception:  # noqa: BLE001 - a note must not replace the error it explains
            pass


def call_loss(loss_fn, output, target, where):
    """``loss_fn(output, target)``; an exception from it (the user's code) propagates, its
    traceback whole, with a note: ``where()`` (called only then), then the shapes of output
    and target.  The executor and ``ppir profile`` call the loss through it."""
    try:
        return loss_fn(output, target)
    except Exception as e:
        note(
            e, lambda: f"{where()}, given output {shapes_of(output)} and target {shapes_of(target)}"
        )
        raise


def shapes_of(value) -> str:
    """:func:`describe` of a value's spec, or ``its input`` for what is no boundary value."""
    try:
        return describe(flatten(value)[1])
    except Exception:  # noqa: BLE001 - only said in a note
        return "its input"


def split_batch(value, n: int, where: str, unit: str = "microbatch") -> list:
    """A batch (tensor, or tuple/list/dict of tensors) cut into ``n`` equal parts (``unit``,
    singular) along dim 0; ValueError naming ``where`` when a leaf's dim 0 does not divide."""
    leaves, spec = flatten(value, where)
    parts: list[list[torch.Tensor]] = [[] for _ in range(n)]
    for leaf in leaves:
        if leaf.dim() == 0 or leaf.shape[0] % n:
            raise ValueError(
                f"{where} have shape {tuple(leaf.shape)}: dim 0 must split into "
                f"{count(n, 'equal ' + unit)}{_fits(leaf)}"
            )
        for k, chunk in enumerate(leaf.chunk(n)):
            parts[k].append(chunk)
    return [unflatten(spec, p) for p in parts]


def check_batch(value, where: str, name: str) -> None:
    """TypeError unless ``value``, ``make_batch``'s ``name`` (``inputs`` or ``targets``) as
    ``where`` (``make_batch(0)``) gave it, is a tensor or a tuple, list or dict of tensors."""
    try:
        flatten(value, f"{where} {name}", BATCH)
    except TypeError as e:
        if value is None and name == "targets":
            raise TypeError(
                f"{e} (a loss_fn that needs no targets still gets its microbatch's slice of "
                "them: return a placeholder whose dim 0 is the batch's, e.g. "
                "torch.zeros(batch_size))"
            ) from None
        raise


def to_device(value, device):
    leaves, spec = flatten(value)
    return unflatten(spec, [t.to(device) for t in leaves])


# ---------------------------------------------------------------- a stage's values, as the runtime
# moves them (the executor and ppir profile both call these)
def stage_input(x, needs_grad: bool):
    """(the value a stage is called with, the leaves of it that require grad): ``x``'s leaves
    detached; with ``needs_grad`` (the input is not the data, and the step trains) the
    floating-point ones require grad: each stage runs as its own autograd graph."""
    leaves, spec = flatten(x)
    grad_in = []
    for k, t in enumerate(leaves):
        t = t.detach()
        if needs_grad and t.is_floating_point():
            t.requires_grad_(True)
            grad_in.append(t)
        leaves[k] = t
    return unflatten(spec, leaves), grad_in


def float_leaves(y) -> list:
    """The floating-point leaves of a piece's output: what its backward starts from."""
    return [t for t in flatten(y)[0] if t.is_floating_point()]


def detached(y):
    """``y`` with every leaf detached (the value handed to the next piece or sent)."""
    leaves, spec = flatten(y)
    return unflatten(spec, [t.detach() for t in leaves])


def backward_args(outs: list, grads: list | None) -> tuple[list, list]:
    """(outputs, their gradients) to backpropagate: for a loss (``grads`` None) the loss
    itself; else the outputs that require grad, each with its gradient."""
    if grads is None:
        return outs, [None]
    pairs = [(o, g) for o, g in zip(outs, grads) if o.requires_grad]
    return [o for o, _ in pairs], [g for _, g in pairs]


def input_grads(grad_in: list, dx: list) -> list:
    """The gradient a piece hands to its predecessor: one tensor per leaf that required grad,
    zeros where the backward gave none (the output does not depend on it)."""
    return [torch.zeros_like(x) if g is None else g for x, g in zip(grad_in, dx)]


def value_bytes(spec) -> int:
    """Bytes of a value of ``spec``: the sum over its tensor leaves."""
    total = 0
    for shape, dtype in leaf_specs(spec):
        n = 1
        for d in shape:
            n *= d
        total += n * dtype.itemsize
    return total


def send_tensors(value, grad: bool) -> list:
    """The tensors of one message: an activation's leaves, or a gradient's list."""
    tensors = value if grad else flatten(value)[0]
    return [t.contiguous() for t in tensors]


def message_specs(spec, grad: bool) -> list[tuple[tuple[int, ...], torch.dtype]]:
    """(shape, dtype) of each tensor of one message across a boundary of ``spec``: every leaf
    of an activation, the floating-point leaves of a gradient."""
    specs = leaf_specs(spec)
    return [(shape, dt) for shape, dt in specs if dt.is_floating_point] if grad else specs


def recv_buffers(specs: list, device) -> list:
    """Empty tensors to receive a message of these :func:`message_specs`."""
    return [torch.empty(shape, dtype=dt, device=device) for shape, dt in specs]


def _fits(leaf) -> str:
    """`` (16 splits into 1, 2, 4, 8 or 16 equal parts)``: what a batch of this size allows;
    "" for a tensor without a batch dimension."""
    if leaf.dim() == 0:
        return ""
    size = int(leaf.shape[0])
    if size == 1:
        return " (a batch of 1 does not split)"
    small = [d for d in range(1, math.isqrt(size) + 1) if size % d == 0]
    ds = sorted(set(small + [size // d for d in small]))  # every divisor, the size itself too
    if len(ds) > 12:
        return f" ({size} splits into {', '.join(map(str, ds[:11]))}, ..., {size} equal parts)"
    return f" ({size} splits into {', '.join(map(str, ds[:-1]))} or {size} equal parts)"


def received(spec, grad: bool, tensors: list):
    """The value a message's received ``tensors`` make (a gradient stays a list)."""
    return tensors if grad else unflatten(spec, tensors)
