"""Human-readable times and sizes shared by every command's output, and memory sizes and
comma lists read from the command line."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

from ppir.diagnostics import count, error


def fmt_exact(x) -> str:
    """An exact number as one would type it: ``2``, ``0.3`` (3/10: a decimal that ends), ``1/3``
    (one that does not), so that ``--comm-latency 0.3`` is said back as 0.3, not 3/10."""
    q = Fraction(x)
    d = q.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d != 1:
        return str(q)
    return format(Decimal(q.numerator) / Decimal(q.denominator), "f")


def fmt_time(x: float, unit: str) -> str:
    """``12.5`` in units, or seconds scaled to s / ms / us (:func:`seconds_scale`)."""
    if unit != "s":
        return f"{x:.6g}"
    scale, suffix = seconds_scale(x)
    return f"{x / scale:.4g} {suffix}"


def seconds_scale(x: float) -> tuple[float, str]:
    """The scale and suffix :func:`fmt_time` writes ``x`` seconds in: s, ms or us."""
    for scale, suffix in ((1.0, "s"), (1e-3, "ms")):
        if abs(x) >= scale:
            return scale, suffix
    return 1e-6, "us"


def unit_meaning(F, short: bool = False, equals: bool = False) -> str:
    """What one time unit is where times are not seconds (no model, no measured costs): one
    forward of a full rank share when a forward costs 1 (``F=1``, the default); with other op
    costs (``--cost F=2``, a config's ``[costs]``) the unit those numbers are in, which ppir
    cannot name.  ``short``: as the assumptions line says it; ``equals``: after a figure in
    units, ``1 unit = one forward ...`` (the op costs' unit is not said to equal itself)."""
    forward = "forward" if short else "forward of a full rank share"
    if F == 1:
        return f"{'1 unit = ' if equals else ''}one {forward}"
    return f"the op costs' unit, in which a {forward} is {fmt_exact(F)}"


_BYTE_UNITS = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))


def processors_meaning(processors: int, ranks=None) -> str:
    """What ``processors`` shared processors mean, as the assumptions line says it: ``the ranks
    share 2 processors``; with at least one per rank (``ranks``, when known), that only
    transfers and reductions, which run on them too, can make work wait.  ``ranks`` may be the
    pipeline sizes of a search's candidates (``ppir tune``), each timed on ``processors`` of
    its own: then it is said of each candidate's ranks."""
    n = count(processors, "processor")
    sizes = sorted({ranks} if isinstance(ranks, int) else set(ranks or ()))
    calm = (
        "nothing slows unless transfers and reductions bring the work running at once "
        f"above {processors}"
    )
    whose = "each candidate's pipeline ranks" if len(sizes) > 1 else "the ranks"
    if not sizes or processors < sizes[0]:
        return f"{whose} share {n}"
    if len(sizes) == 1:
        return f"{n} for {count(sizes[0], 'rank')} ({calm})"
    if processors >= sizes[-1]:
        return f"{n} for each candidate's {sizes[0]} to {sizes[-1]} pipeline ranks ({calm})"
    return f"{n} for {whose} (shared where there are more than {processors}; elsewhere {calm})"


def _decimals(x: float, digits: int) -> int:
    """The decimals that leave ``digits`` significant digits of ``x``, none below 0."""
    return max(digits - 1 - math.floor(math.log10(abs(x))), 0)


def round_sig(x: float, digits: int) -> float:
    """``x`` to ``digits`` significant digits, but never rounded into its integer digits:
    ``round_sig(12345.6, 4)`` is 12346, not 12350 (``f"{x:.4g}"`` gives 1.235e+04);
    ``round_sig(0.012345, 3)`` is 0.0123.  The rule of every figure shown rounded."""
    x = float(x)
    if not x or not math.isfinite(x):
        return x
    return round(x, _decimals(x, digits))


def fmt_sig(x: float, digits: int) -> str:
    """:func:`round_sig` as text, never in exponent form, without trailing zeros: ``1020``,
    ``1.02``, ``5``, ``0.00125``."""
    x = float(x)
    if not x or not math.isfinite(x):
        return f"{x:g}"
    text = f"{x:.{_decimals(x, digits)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_bytes(n: float) -> str:
    """``545 MiB``, ``1.5 GiB``, ``1020 MiB`` (3 significant digits, every integer digit)."""
    for scale, suffix in _BYTE_UNITS:
        if n >= scale:
            return f"{fmt_sig(n / scale, 3)} {suffix}"
    return f"{n:.0f} B"


_SIZE_UNITS = (
    ("GiB", 2**30),
    ("MiB", 2**20),
    ("KiB", 2**10),
    ("TiB", 2**40),
    ("GB", 10**9),
    ("MB", 10**6),
    ("KB", 10**3),
    ("TB", 10**12),
    ("B", 1),
    ("A", None),
)
"""The units a memory size is read in: binary (``GiB``: 2^30 bytes), decimal (``GB``: 10^9
bytes, as SI and disk makers count), bytes (``B``) and ``A`` (a microbatch's activations of a
rank share)."""

_DECIMAL_WORDS = {"KB": "kilobytes", "MB": "megabytes", "GB": "gigabytes", "TB": "terabytes"}


def _has_unit(t: str, suffix: str, scale) -> bool:
    return t.endswith(suffix) or (scale is not None and t.lower().endswith(suffix.lower()))


def decimal_reading(text: str | None) -> tuple[str, str] | None:
    """How :func:`parse_budget` reads a size in a decimal unit, to say back so that nobody takes
    ``80GB`` for a GPU's 80 GiB: (``80 decimal gigabytes, 80 x 10^9 bytes = 74.51 GiB``, ``for
    80 x 2^30 bytes write 80GiB``); None for a binary unit, ``A``, or no size."""
    t = (text or "").strip()
    for suffix, scale in _SIZE_UNITS:
        if not _has_unit(t, suffix, scale):
            continue
        num = t[: -len(suffix)].strip()
        if suffix not in _DECIMAL_WORDS or not is_number(num):
            return None
        power = round(math.log10(scale))
        return (
            f"{num} decimal {_DECIMAL_WORDS[suffix]}, {num} x 10^{power} bytes = "
            f"{fmt_memory(float(num) * scale)}",
            f"for {num} x 2^{power // 3 * 10} bytes write {num}{suffix[0]}iB",
        )
    return None


def parse_budget(
    text: str | None, has_model: bool, flag: str = "memory size"
) -> tuple[float, str] | None:
    """``40GiB``, ``80GB``, ``512MiB``, ``64KiB``, ``1000B`` (bytes: needs memory sizes) or
    ``6A``: (value, "bytes"|"A").  ``flag`` names the option in the messages
    (``--gpu-memory 80: ...``)."""
    if text is None:
        return None
    t = text.strip()
    for suffix, scale in _SIZE_UNITS:  # byte units in any case (80gib); A as written
        if _has_unit(t, suffix, scale):
            num = t[: -len(suffix)].strip()
            try:
                x = float(num)
            except ValueError:
                break
            if not math.isfinite(x):  # nan compared as no size at all; inf left nothing
                e_g = "6A" if scale is None else "80GiB"
                raise error("bad-usage", f"{flag} {text}: expected a finite size, e.g. {e_g}")
            if x <= 0:
                raise error("bad-usage", f"{flag} {text}: must be positive")
            if scale is None:
                return x, "A"
            if not has_model:
                raise error(
                    "bad-usage",
                    f"{flag} {text}: a budget in bytes needs memory sizes: --model, or a "
                    "cost file from 'ppir profile' that holds them (activation, parameter and "
                    "optimizer bytes)",
                    hints=[  # --gpu-memory takes bytes only: the budget in A is --memory-budget
                        "without them give the budget in A, e.g. "
                        + ("--memory-budget 6A" if flag == "--gpu-memory" else "6A")
                    ],
                )
            if suffix == "B" and x < 2**20:  # 80B: 80 bytes, meant as 80 GB
                raise error(
                    "bad-usage",
                    f"{flag} {text}: {num} bytes is less than a MiB",
                    hints=[f"a size in bytes needs its prefix, e.g. {num}GiB or {num}GB"],
                )
            return x * scale, "bytes"
    want = "a size in bytes, e.g. 80GiB or 80GB" if has_model else "e.g. 40GiB, 80GB or 6A"
    num = t.rstrip("gGtTmMkK")  # a bare number, or one with a unit cut short (80, 80G)
    hints = []
    if num and is_number(num):
        unit = (t[len(num) :].upper() or "G")[0]
        hints = [f"a size needs its unit, e.g. {num}{unit}iB or {num}{unit}B"]
        if num == t and float(num) >= 2**20:  # a count of bytes, by its size
            hints = [f"a size needs its unit: {num}B for bytes"]
        if not has_model:  # bytes would be refused next: A is the unit without sizes
            hints = [
                f"without memory sizes (--model, or a cost file that holds them) a budget is "
                f"in A, e.g. {num}A"
            ]
    raise error("bad-usage", f"{flag} {text}: expected {want}", hints=hints)


def comma_entries(text: str, named: str, kind: str) -> list[str]:
    """The comma-separated entries of ``text``, stripped; a trailing comma is allowed, an entry
    left empty between commas (or an empty ``text``) is a ppir error of ``kind``: ``NAMED: an
    empty entry between commas`` (``named``: the option and its text, ``--cost F=1,,B=2``).
    The one rule of ``--model``, ``--cost`` and tune's lists."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) > 1 and not parts[-1]:  # a trailing comma
        parts.pop()
    if not all(parts):
        raise error(kind, f"{named}: an empty entry between commas")
    return parts


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def size_unit(x: float) -> tuple[int, str]:
    """(bytes per unit, its name) to show ``x`` bytes in: GiB, or MiB or KiB below one GiB or
    one MiB."""
    return next(((s, n) for s, n in _BYTE_UNITS[1:3] if x >= s), _BYTE_UNITS[3])


def fmt_size(x: float, unit: str, digits: int = 4) -> str:
    """A memory size in A (``"A"``) or, for bytes, in its :func:`size_unit`, to ``digits``
    significant digits, every integer digit kept (:func:`fmt_sig`)."""
    if unit == "A":
        return f"{fmt_sig(x, digits)} A"
    scale, name = size_unit(x)
    return f"{fmt_sig(x / scale, digits)} {name}"


def fmt_memory(x: float, decimals: int = 2) -> str:
    """Bytes in their :func:`size_unit` with two decimals, ``43.66 GiB``, ``50.00 GiB``: how
    every command prints a rank's whole memory and a memory budget (``ppir compile --backend
    cost``'s peak, ``ppir tune``'s ``peak mem``, its budget and its rejections), so the same
    figure reads the same everywhere; more ``decimals`` only to tell two apart
    (:func:`fmt_sizes_apart`)."""
    scale, name = size_unit(x)
    return f"{x / scale:.{decimals}f} {name}"


def fmt_sizes_apart(x: float, y: float, unit: str) -> tuple[str, str]:
    """Two sizes a message compares (a peak and a budget), bytes as :func:`fmt_memory` prints
    them (in A, :func:`fmt_size`), with as many more digits as it takes for different sizes
    to read differently: not ``189.70 GiB exceeds the budget 189.70 GiB`` but ``189.704 GiB
    ... 189.700 GiB``."""
    for more in range(18):  # 17 significant digits tell any two floats apart
        if unit == "A":
            a, b = fmt_size(x, unit, 4 + more), fmt_size(y, unit, 4 + more)
        else:  # up to 19 decimals: more than the 17 significant digits any float needs
            a, b = fmt_memory(x, 2 + more), fmt_memory(y, 2 + more)
        if a != b or x == y:
            break
    return a, b


def microbatch_json(microbatches: int, pipelines: int = 1) -> dict:
    """The microbatch counts of the JSON reports (``ppir.estimate/2``, ``ppir.analysis/2``, a
    ``ppir.viz/2`` run; a ``ppir.tune/2`` row has the first two too), from one pipeline's
    ``microbatches`` (the schedule's declaration): ``microbatches`` per step, every pipeline's
    together (16 for ``dualpipe -D M=16``, as the text's ``16 microbatches (8 per pipeline)``),
    ``microbatches_per_pipeline`` one pipeline's, and ``pipelines`` when more than one."""
    several = {"pipelines": pipelines} if pipelines != 1 else {}
    return {
        "microbatches": microbatches * pipelines,
        "microbatches_per_pipeline": microbatches,
        **several,
    }


def json_bytes(nbytes):
    """A byte count as JSON writes it: an integer when it is whole (3221225472, not
    3221225472.0), else as it is (None stays None)."""
    if nbytes is not None and float(nbytes).is_integer():
        return int(nbytes)
    return nbytes
