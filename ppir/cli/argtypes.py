"""argparse ``type=`` functions shared by the commands: a bad value is a usage error (exit 2)
naming the option, from argparse itself; an output path the file system refuses is the
one-line error of a failed write (:func:`output_path`).  ``ppir.torch.run`` (the runtime's
options, which ``ppir launch`` shares) imports them from here, so one flag has one type
everywhere."""

from __future__ import annotations

import argparse
import math
import os
import re

from ppir.diagnostics import error, given_twice
from ppir.frontend.limits import read_int


def integer(text: str) -> int:
    """An integer, read as a ``-D`` value is (:func:`ppir.frontend.limits.read_int`: ASCII
    digits only, where ``type=int`` took ``-P ٤`` for 4); every integer option's type, or
    :func:`positive_int`'s (tests/test_flag_vocabulary.py checks that no option takes ``int``)."""
    try:
        return read_int(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def positive_int(text: str) -> int:
    """An :func:`integer` of at least 1."""
    v = integer(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


_BYTES = re.compile(r"[0-9.]+\s*([kmgt]i?)?b", re.IGNORECASE)  # 40GiB, 80GB, 512mib, 1000B


def activation_count(text: str) -> int:
    """A whole number of A, one microbatch's activations of a rank's share (``ppir synth
    --mem-cap``): ``4``, or ``4A`` with the unit as ``ppir tune --memory-budget`` writes it
    (an :func:`integer`; its range is the caller's to check).  A fraction, a size in bytes
    (no model sizes an A in bytes there) or other text is refused naming the value and what
    the option takes."""
    t = text.strip()
    body = t[:-1].strip() if t.endswith("A") else t
    try:
        return read_int(body)
    except ValueError:
        pass
    what = "expected a whole number of A (one microbatch's activations of a rank's share)"
    if _BYTES.fullmatch(t):
        raise argparse.ArgumentTypeError(
            f"{what}, e.g. 4 or 4A, got {text!r}: a size in bytes needs a model to size an A, "
            "and synth has none (ppir tune --gpu-memory takes bytes, with --model)"
        )
    try:
        x = _float(body)
    except ValueError:
        x = math.nan
    if not math.isfinite(x):  # text, or nan and inf (which float() reads)
        raise argparse.ArgumentTypeError(f"{what}, e.g. 4 or 4A{_ascii(text)}, got {text!r}")
    below = f" (give {math.floor(x)} to stay within {body})" if x >= 1 else ""
    raise argparse.ArgumentTypeError(
        f"{what}, got {text!r}: the cap and the schedule synth writes count whole A{below}"
    )


def _float(text: str) -> float:
    """float() of ASCII text only (float() alone reads '٤' as 4.0, as int() does)."""
    if not text.isascii():
        raise ValueError(text)
    return float(text)


def _ascii(text: str) -> str:
    return "" if text.isascii() else " in ASCII digits"


def number(text: str) -> float:
    """A number, in ASCII digits (what every option of a plain number takes, not ``float``)."""
    try:
        return _float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number{_ascii(text)}, got {text!r}") from None


def positive_seconds(text: str) -> float:
    """A finite number of seconds above 0."""
    try:
        v = _float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds{_ascii(text)}, got {text!r}"
        ) from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return v


def learning_rate(text: str) -> float:
    """A finite learning rate of 0 or more (torch's optimizers refuse a negative one)."""
    try:
        v = _float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number{_ascii(text)}, got {text!r}") from None
    if not 0 <= v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite learning rate of 0 or more, got {text}")
    return v


def nonempty_path(text: str) -> str:
    """A path to write to, not empty or blank (an empty one wrote to a default name, to
    standard output, or was refused only after compiling); for options every rank of a
    multi-node run reads but one writes (the folder may exist on that node only)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("needs a file path, got an empty one")
    return text


def output_path(text: str) -> str:
    """A :func:`nonempty_path` that is not a directory, in a directory that exists (checked
    when the command line is read, before any work), and not ``-`` (which many tools read as
    standard output: ppir wrote a file named ``-``).  An empty path is argparse's usage error;
    a path the file system refuses is the one-line ``bad-output`` error that a failed write
    gives (``ppir: error: cannot write PATH: WHY``, exit 2), which ``ppir.cli.main`` prints."""
    nonempty_path(text)
    if text == "-":  # wrote a file named '-' and printed nothing: '-o - | jq' read no output
        why = "'-' is not standard output here; give a file path (./- for a file named '-')"
        raise error("bad-output", f"cannot write -: {why}")
    if os.path.isdir(text):
        raise error("bad-output", f"cannot write {text}: it is a directory; give a file path")
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        above = folder  # the nearest path above that exists: /tmp/f of /tmp/f/sub/out.html
        while not os.path.lexists(above) and os.path.dirname(above) != above:
            above = os.path.dirname(above)
        why = f"no such directory {folder}"
        if os.path.lexists(above) and not os.path.isdir(above):
            why = f"{above} is {'a file, ' if os.path.isfile(above) else ''}not a directory"
        raise error("bad-output", f"cannot write {text}: {why}")
    return text


_INT = re.compile(r"[+-]?[0-9]+")  # ASCII digits only: int() reads '١٢' (Arabic-Indic) as 12
_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def key_values(items: list[str], flag: str) -> dict:
    """``["layers=4", "lr=0.1", "name=x"]`` -> ``{"layers": 4, "lr": 0.1, "name": "x"}``: a
    plain decimal integer, then a plain decimal number (``1e-3`` too), in ASCII digits, else
    the text as given (``nan``, ``inf``, ``1_000``, ``١٢`` and a number a float cannot hold,
    ``1e400``, stay text); a malformed item, or a key given twice with two values, raises
    ``ValueError("FLAG ITEM: ...")``."""
    out: dict = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.isidentifier():
            raise ValueError(f"{flag} {item}: expected KEY=VALUE")
        v = _number(value.strip())
        if v is None:
            v = value
        if out.get(key, v) != v:  # the same value twice is accepted, as -D's is
            raise ValueError(f"{flag} {item}: {given_twice(key, out[key], v)}")
        out[key] = v
    return out


def _number(text: str) -> int | float | None:
    """``text`` as a plain decimal integer or number (:func:`key_values`), or None: not one, or
    one Python does not hold as written (a float past 1.8e308 would be ``inf``; int() refuses
    an integer of more than 4,300 digits)."""
    try:
        if _INT.fullmatch(text):
            return int(text)
        if _FLOAT.fullmatch(text):
            v = float(text)
            return v if math.isfinite(v) else None
    except ValueError:  # int()'s digit limit
        pass
    return None


def module_names_a_file(spec: str) -> bool:
    """Whether a ``--module`` value names a file (an existing file, a ``.py`` name or a path
    with a separator) rather than a dotted module name."""
    return spec.endswith(".py") or "/" in spec or os.sep in spec or os.path.isfile(spec)


def module_folder_note(spec: str, defines: str = "build_stage, make_batch and loss_fn") -> str:
    """For a ``--module`` value that names a folder, what to give instead (a model module is
    one file): a path to a folder, or a dotted name of a folder without ``__init__.py`` (a
    namespace package, which has no code); "" for anything else (a package is a module)."""
    dotted = not module_names_a_file(spec)
    folder = spec.replace(".", os.sep) if dotted else spec  # pkg.sub: the folder pkg/sub
    if not os.path.isdir(folder):
        return ""
    if dotted and os.path.isfile(os.path.join(folder, "__init__.py")):
        return ""
    return f"{spec} is a folder: give the .py file that defines {defines}"
