"""The functions of a model module (``ppir launch --module``) and the runtime's ``loss_fn``,
checked before anything calls them: each can be called as the runtime calls it, a ``loss_fn``
is no class, a ``configure`` takes the ``--module-opt`` keys given.  Problems are one-line
:class:`ModelError` naming the function, its signature and where it is defined."""

from __future__ import annotations

import inspect
from pathlib import Path

from ppir.diagnostics import did_you_mean
from ppir.torch.errors import ModelError

CONTRACT = (
    "a model module defines build_stage(stage, num_stages), make_batch(step) and "
    "loss_fn(output, target); docs/executor.md"
)
REQUIRED = ("build_stage", "make_batch", "loss_fn")


def lacks_message(spec: str, missing: list[str], own: list[str], folder: str = "") -> str:
    """What a model module that lacks some of :data:`REQUIRED` is told: what it lacks, the
    functions it defines (a misspelt name shows there), ``folder`` (a note on a folder given
    for a file) and the contract."""
    return (
        f"model {spec!r} lacks {', '.join(missing)}"
        + (f"; it defines {', '.join(own)}" if own else "")
        + (f" ({folder})" if folder else "")
        + f" ({CONTRACT})"
    )


# how the runtime calls the module's functions: positional arguments, by their contract names
CALLS = {
    "build_stage": ("stage", "num_stages"),
    "make_batch": ("step",),
    "loss_fn": ("output", "target"),
    "make_optimizer": ("params",),
}


def check_loss_fn(loss_fn, where: str, needed: bool = True) -> None:
    """ModelError (``where: ...``) unless ``loss_fn`` is a callable other than a class: a
    class (``nn.CrossEntropyLoss`` for ``nn.CrossEntropyLoss()``) called with (output,
    target) builds a loss module from them, which failed deep inside its constructor.  Where
    it is not ``needed`` (a rank without the last stage never calls it) None is fine."""
    if loss_fn is None and not needed:
        return
    if isinstance(loss_fn, type):
        name = loss_fn.__name__
        raise ModelError(
            f"{where}: loss_fn is the class {name}: called as loss_fn(output, target) it "
            f"makes a {name} instead of a loss; give an instance, {name}()"
        )
    if not callable(loss_fn):
        raise ModelError(
            f"{where}: loss_fn is {type(loss_fn).__name__}, not a function (the rank holding "
            "the last stage calls it)"
        )


def check_functions(spec: str, mod) -> None:
    """ModelError unless the module's functions (those it has) can be called as the runtime
    calls them (:data:`CALLS`) and its ``loss_fn`` is no class."""
    check_loss_fn(mod.loss_fn, f"model {spec!r}")
    for name, args in CALLS.items():
        _check_call(spec, mod, name, args)


def _signature(fn) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without one: its call will tell
        return None


def _check_call(spec: str, mod, name: str, args: tuple[str, ...]) -> None:
    """ModelError unless the module's ``name`` (when it has one) takes ``args`` positionally,
    as the runtime calls it: a wrong signature was a TypeError traceback through the runtime's
    own frames, at the first call on each rank."""
    fn = getattr(mod, name, None)
    sig = _signature(fn) if callable(fn) else None
    if sig is None:
        return
    try:
        sig.bind(*args)
    except TypeError as e:
        raise ModelError(
            f"model {spec!r}: {name}{sig}{_where(fn)} cannot be called as "
            f"{name}({', '.join(args)}), as the runtime calls it ({e}); {CONTRACT}"
        ) from None


def check_options(spec: str, configure, options: dict) -> None:
    """ModelError naming the option when ``configure`` cannot take ``options`` by keyword (a
    misspelt ``--module-opt`` key of a ``configure(width=16, ...)``), before it is called."""
    sig = _signature(configure)
    try:
        if sig is not None:
            sig.bind(**options)
    except TypeError as e:
        ps = sig.parameters.values()
        names = [p.name for p in ps if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        unknown = [k for k in options if k not in names]
        what = f"configure{sig}{_where(configure)}"
        if unknown and not any(p.kind == p.VAR_KEYWORD for p in ps):
            k = unknown[0]
            hint = "".join(f"; {h}" for h in did_you_mean(k, names))
            raise ModelError(
                f"--module-opt {k}={options[k]}: model {spec!r} has no option {k!r} (its "
                f"{what}){hint}"
            ) from None
        given = ", ".join(f"{k}={v}" for k, v in options.items())
        raise ModelError(f"model {spec!r}: its {what} cannot take {given} ({e})") from None


def _where(fn) -> str:
    """`` at file.py:N`` for a function defined in Python, else ``""``."""
    code = getattr(fn, "__code__", None)
    return f" at {Path(code.co_filename).name}:{code.co_firstlineno}" if code else ""
