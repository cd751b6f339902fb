"""Seeded robustness fuzz of ``ppir check``: whatever the input, a located diagnostic, in time.

    python bench/fuzz_frontend.py [--seed 19] [--count 6000] [--limit 10] [--jobs 1]
                                  [--only I[,J...]] [--save DIR] [--json PATH]

Generates ``--count`` inputs from ``--seed`` (input i is the same for a given seed and count,
whatever else runs) and runs ``ppir check`` on each, in-process, in a worker process that is
killed and replaced when an input runs past the hard limit (``2 x --limit``).  Categories:

  mutation  token-level mutations of the built-in .pps files (delete, duplicate, swap, insert a
            token of the language or a random character, replace a number, truncate, duplicate
            or drop a line), sometimes with -D values
  literal   the same on lowered literal programs (``rank N:`` lines with groups, post/wait)
  csv       cell-level mutations of torch CSV schedules
  bytes     random bytes, printable noise and invalid UTF-8 spliced into the built-ins
  empty     empty, blank, comment-only and BOM-only files
  huge      integer literals of 19 to 30,000 digits in every place a number goes, -D values
            of that size, and computed values that overflow
  deep      nesting from 100 to 20,000 levels: operator chains, unary chains, calls, blocks
  size      sizes far beyond the caps: -D P/M/v of 10**7 and more, literal files that declare
            or imply huge ranks, stages or microbatches
  repro     the front-end reproducers of issue 19, verbatim

``mutation``, ``literal``, ``csv``, ``bytes``, ``empty`` and ``deep`` run under the fuzz caps
``--max-ops 50000 --max-steps 2000000`` (a mutated number may ask for a valid schedule of
millions of ops, which is work, not a hang: ppir's time is linear in ops, about 85 us per op
here, so the caps bound every input's time); ``huge``, ``size`` and ``repro`` run under the
default caps, so that what the caps must refuse before any work is refused there.

Per input it reports: a traceback (an exception escaping ``ppir.cli.main``, or "Traceback" in
its output); over the limit (seconds, with the innermost ppir frame of the stack at the limit);
a diagnostic without ``file:line:col`` (``ppir: error:`` lines are allowed only for ``-D``
values, which they name); a located diagnostic without its quoted line and caret; an output
line over 400 characters; an exit status other than 0, 1 or 2.  Inputs over the limit whose
stack is in a file the lead is rewriting (``KNOWN_SLOW``) are counted separately.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing as mp
import os
import random
import re
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field

FUZZ_CAPS = ["--max-ops", "50000", "--max-steps", "2000000"]
KNOWN_SLOW = {  # innermost ppir file of a stack -> why it is known
    "ppir/verify/structure.py": "completeness check O(stages x M) (lead)",
    "ppir/analysis/order.py": "PlanCosts.uniform ranks x ranks link matrix (lead)",
}
LEAD_FILES = ("ppir/verify/", "ppir/analysis/", "ppir/passes/", "ppir/ir/graph.py", "ppir/pipeline")
TOKEN = re.compile(
    r"\s+|#[^\n]*|\"[^\"\n]*\"|\(\d+F\d+;\d+[BI]\d+\)OVERLAP_F_B|\d+[A-Z_]+\d+|[A-Za-z_]\w*"
    r"|\d+|\.\.|//|==|!=|<=|>=|.",
    re.S,
)
BODY = "ranks 1\nmicrobatches 1\nprogram r { F(0) B(0) }\n"
HUGE_DIGITS = (19, 20, 25, 50, 100, 1000, 4299, 4300, 4301, 5000, 20000)


@dataclass
class Case:
    index: int
    category: str
    files: dict[str, bytes]
    argv: list[str]  # "{dir}" stands for the case's directory
    caps: list[str] = field(default_factory=list)

    def command(self, folder: str) -> list[str]:
        return ["check", *(a.replace("{dir}", folder) for a in self.argv), *self.caps]


# ------------------------------------------------------------------ material
class Material:
    """Texts the generators mutate: the built-ins, their lowered literal dumps, CSVs."""

    def __init__(self):
        from ppir.frontend.csvio import write_csv
        from ppir.frontend.loader import load_schedule
        from ppir.ir.printer import format_pps
        from ppir.passes import LowerComms, OverlapComms
        from ppir.schedules import builtin_names, builtin_source

        self.names = builtin_names()
        self.sources = {n: builtin_source(n) for n in self.names}
        self.params = {n: re.findall(r"(\w+)\s*=", self._header(n)) for n in self.names}
        self.literals, self.csvs = [], []
        for n in self.names:
            try:
                s = load_schedule(n, {"P": 2, "M": 4} if "P" in self.params[n] else {})
            except Exception:  # noqa: BLE001 - a built-in that needs other sizes
                continue
            low = LowerComms("lockstep").apply(s)
            self.literals.append(format_pps(low))
            self.literals.append(format_pps(OverlapComms(verify=False).apply(low)))
            self.csvs.append(write_csv(s))
            self.csvs.append(write_csv(low, compute_only=False))
        vocab = {t for src in [*self.sources.values(), *self.literals] for t in TOKEN.findall(src)}
        self.vocab = sorted(t for t in vocab if t.strip())

    def _header(self, name: str) -> str:
        m = re.search(r"^schedule[^\n]*", self.sources[name], re.M)
        return m.group(0) if m else ""


def _number(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.5:
        return str(rng.randint(0, 20))
    if r < 0.8:
        return str(rng.randint(-50, 1000))
    if r < 0.95:
        return str(rng.randint(0, 10**6))
    return str(rng.randint(0, 10**30))


def mutate(
    rng: random.Random, text: str, vocab: list[str], edits: int, semantic: bool = False
) -> str:
    """Token-level edits; ``semantic`` ones keep the syntax more often (numbers, names and
    whole lines change, nothing is cut mid-construct)."""
    toks = TOKEN.findall(text) or [""]
    for _ in range(edits):
        op = rng.choice("nnwwLl" if semantic else "ddDsiinnrtLlw")
        i = rng.randrange(len(toks))
        if op == "d" and len(toks) > 1:
            del toks[i]
        elif op == "D":
            toks.insert(i, toks[i])
        elif op == "s":
            j = rng.randrange(len(toks))
            toks[i], toks[j] = toks[j], toks[i]
        elif op == "i":
            toks.insert(i, rng.choice(vocab) + rng.choice(["", " "]))
        elif op == "n":
            nums = [k for k, t in enumerate(toks) if t.isdigit()]
            if nums:
                toks[rng.choice(nums)] = _number(rng)
        elif op == "r":
            toks.insert(i, chr(rng.choice([rng.randrange(0x20, 0x7F), rng.randrange(0x250)])))
        elif op == "t":
            toks = toks[:i] or [""]
        elif op == "w":
            names = [
                k for k, t in enumerate(toks) if re.fullmatch(r"[A-Za-z_]\w*|\d+[A-Z_]+\d+", t)
            ]
            words = [t for t in vocab if re.fullmatch(r"[A-Za-z_]\w*|\d+[A-Z_]+\d+", t)]
            if names:
                toks[rng.choice(names)] = rng.choice(words)
        elif op in "Ll":
            lines = "".join(toks).splitlines(keepends=True) or [""]
            k = rng.randrange(len(lines))
            if op == "L":
                lines.insert(rng.randrange(len(lines) + 1), lines[k])
            elif len(lines) > 1:
                del lines[k]
            toks = TOKEN.findall("".join(lines)) or [""]
    return "".join(toks)


def _defines(rng: random.Random, params: list[str]) -> list[str]:
    out: list[str] = []
    for p in params:
        if rng.random() < 0.4:
            out += ["-D", f"{p}={rng.choice([1, 2, 3, 4, 8, rng.randint(0, 16)])}"]
    return out


# ------------------------------------------------------------------ generators
def gen_mutation(rng, mat: Material, i: int) -> Case:
    name = rng.choice(mat.names)
    semantic = rng.random() < 0.5
    text = mutate(rng, mat.sources[name], mat.vocab, rng.randint(1, 4), semantic)
    argv = ["{dir}/m.pps", *_defines(rng, mat.params[name])]
    return Case(i, "mutation", {"m.pps": text.encode()}, argv, FUZZ_CAPS)


def gen_literal(rng, mat: Material, i: int) -> Case:
    semantic = rng.random() < 0.5
    text = mutate(rng, rng.choice(mat.literals), mat.vocab, rng.randint(1, 3), semantic)
    return Case(i, "literal", {"l.pps": text.encode()}, ["{dir}/l.pps"], FUZZ_CAPS)


def gen_csv(rng, mat: Material, i: int) -> Case:
    rows = [row.split(",") for row in rng.choice(mat.csvs).splitlines()]
    for _ in range(rng.randint(1, 3)):
        r = rng.randrange(len(rows))
        c = rng.randrange(len(rows[r]) or 1)
        op = rng.choice("dcnjq")
        if op == "d" and rows[r]:
            del rows[r][c % len(rows[r])]
        elif op == "c":
            rows[r].insert(c, rng.choice(mat.vocab))
        elif op == "n":
            rows[r].insert(c, f"{rng.randint(-3, 40)}{rng.choice('FBIW')}{_number(rng)}")
        elif op == "j":
            rows.insert(r, [])
        else:
            rows[r].insert(c, '"' + rng.choice(['0F0"', "x", '""', '\n"']))
    text = "\n".join(",".join(row) for row in rows) + "\n"
    return Case(i, "csv", {"t.csv": text.encode()}, ["{dir}/t.csv"], FUZZ_CAPS)


def gen_bytes(rng, mat: Material, i: int) -> Case:
    kind = rng.randrange(4)
    if kind == 0:
        data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
    elif kind == 1:
        alphabet = 'rank 0:FBIW[]()post wait;OVERLAP_F_B\n\t\r#"{}=+-*/%<>!.,microbatches'
        data = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200))).encode()
    else:
        src = bytearray(rng.choice([*mat.sources.values(), *mat.literals]).encode())
        for _ in range(rng.randint(1, 3)):
            pos = rng.randrange(len(src) + 1)
            junk = rng.choice(
                [b"\xff", b"\xc3", b"\xe2\x82", b"\x00", b"\r", b"\x0c", b"\xef\xbb\xbf", b"\x80"]
            )
            src[pos:pos] = junk
        data = bytes(src)
    ext = "csv" if rng.random() < 0.15 else "pps"
    return Case(i, "bytes", {f"b.{ext}": data}, [f"{{dir}}/b.{ext}"], FUZZ_CAPS)


def gen_empty(rng, mat: Material, i: int) -> Case:
    text = rng.choice(
        [
            "",
            "\n",
            "   ",
            "\n\n\n",
            "# only a comment\n",
            "\ufeff",
            "\r\n\r\n",
            "\t",
            "schedule x()\n",
        ]
    )
    ext = rng.choice(["pps", "pps", "csv"])
    return Case(i, "empty", {f"e.{ext}": text.encode()}, [f"{{dir}}/e.{ext}"], FUZZ_CAPS)


def _huge(rng: random.Random) -> str:
    n = rng.choice(HUGE_DIGITS) if rng.random() < 0.6 else rng.randint(19, 30000)
    return str(rng.randint(1, 9)) + "".join(rng.choice("0123456789") for _ in range(n - 1))


HUGE_TEMPLATES = [
    "let x = {N}\n" + BODY,
    "let x = -{N}\n" + BODY,
    "ranks {N}\nmicrobatches 1\nprogram r { F(0) B(0) }\n",
    "ranks 1\nmicrobatches {N}\nprogram r { F(0) B(0) }\n",
    "ranks 1\nstages {N}\nmicrobatches 1\nprogram r { F(0) B(0) }\n",
    "rank 0: 0F{N} 0B0\n",
    "rank {N}: 0F0 0B0\n",
    "rank 0: {N}F0 0B0\n",
    "rank 0: 0F0 [0SEND_F{N}]\n",
    "rank 0: ({N}F0;0B0)OVERLAP_F_B\n",
    "schedule s(P = {N})\nranks P\nmicrobatches 1\nprogram r { F(0) B(0) }\n",
    "schedule s(P = -{N})\nranks P\nmicrobatches 1\nprogram r { F(0) B(0) }\n",
    "ranks 1\nmicrobatches 1\nprogram r { for i in 0 .. {N} { } F(0) B(0) }\n",
    "ranks 1\nmicrobatches 1\nprogram r { F({N}) B(0) }\n",
    "ranks 1\nmicrobatches 1\nplacement [{N}]\nprogram r { F(0) B(0) }\n",
    'require {N} > 0 : "big"\n' + BODY,
]
OVERFLOWS = [
    "let a = 9223372036854775807 + 1\n" + BODY,
    "let a = -9223372036854775807 - 2\n" + BODY,
    "let a = 3037000500 * 3037000500\n" + BODY,
    "let a = 9223372036854775807\n"
    + "".join(f"let a{k} = {'a' if k == 0 else f'a{k - 1}'} * 2\n" for k in range(80))
    + BODY,
    "def sq(x) = x * x\nlet a = sq(sq(sq(sq(sq(sq(sq(10)))))))\n" + BODY,
    "ranks 9223372036854775807\nmicrobatches 9223372036854775807\nprogram r { F(0) B(0) }\n",
    "ranks 1\nmicrobatches 1\nprogram r { for i in 9223372036854775800 .. 9223372036854775807 "
    "{ } F(0) B(0) }\n",
]


def gen_huge(rng, mat: Material, i: int) -> Case:
    r = rng.random()
    if r < 0.55:
        text = rng.choice(HUGE_TEMPLATES).replace("{N}", _huge(rng))
        return Case(i, "huge", {"h.pps": text.encode()}, ["{dir}/h.pps"])
    if r < 0.65:
        text = rng.choice(["0F{N},0B0\n", "{N}F0\n", "0F0,0B{N}\n", "0F0\n1F{N}\n"])
        data = text.replace("{N}", _huge(rng)).encode()
        return Case(i, "huge", {"h.csv": data}, ["{dir}/h.csv"])
    if r < 0.75:
        return Case(i, "huge", {"h.pps": rng.choice(OVERFLOWS).encode()}, ["{dir}/h.pps"])
    if r < 0.88:
        name = rng.choice([n for n in mat.names if mat.params[n]])
        p = rng.choice(mat.params[name])
        return Case(i, "huge", {}, [name, "-D", f"{p}={rng.choice(['', '-'])}{_huge(rng)}"])
    name = rng.choice(mat.names)
    toks = TOKEN.findall(mat.sources[name])
    nums = [k for k, t in enumerate(toks) if t.isdigit()]
    toks[rng.choice(nums)] = _huge(rng)
    return Case(i, "huge", {"h.pps": "".join(toks).encode()}, ["{dir}/h.pps"])


def gen_deep(rng, mat: Material, i: int) -> Case:
    d = rng.choice([100, 149, 150, 151, 200, 500, 1000, 5000, 20000, rng.randint(50, 3000)])
    where = rng.random()
    expr = rng.choice(
        [
            "1+" * d + "1",
            "-" * d + "1",
            "not " * d + "1",
            "(" * d + "1" + ")" * d,
            "min(" * d + "1" + ")" * d,
            "f(" * d + "1" + ")" * d,
            "(1+" * d + "1" + ")" * d,
            "1*" * d + "1",
            "1 == " * d + "1",
        ]
    )
    if where < 0.5:
        text = f"def f(x) = x\nlet q = {expr}\n" + BODY
    elif where < 0.6:
        text = f"def f(x) = x\nranks 1\nmicrobatches 1\nprogram r {{ F({expr}) B(0) }}\n"
    elif where < 0.7:
        text = f'def f(x) = x\nrequire {expr} : "deep"\n' + BODY
    else:
        block = rng.choice(["if 1 {", "for i in 0 .. 1 {", "if 0 { } else {"])
        inner = rng.choice(["", "F(0) B(0)", "let z = 1"])
        text = "ranks 1\nmicrobatches 1\nprogram r { " + (block + " ") * d + inner + " }" * d
        text += rng.choice([" }\n", " F(0) B(0) }\n", "\n"])
    if rng.random() < 0.1:
        text = "def f(n) = 1 + (1 + (1 + f(n - 1)))\nlet y = f(5000)\n" + BODY
    return Case(i, "deep", {"d.pps": text.encode()}, ["{dir}/d.pps"], FUZZ_CAPS)


def _big(rng: random.Random) -> int:
    return rng.choice([10**7, 10**8, 10**9, 10**12, 10**18, rng.randint(10**7, 2**63 - 1)])


def gen_size(rng, mat: Material, i: int) -> Case:
    r = rng.random()
    if r < 0.5:
        name = rng.choice([n for n in mat.names if mat.params[n]])
        argv = [name]
        for p in mat.params[name]:
            if rng.random() < 0.6:
                argv += ["-D", f"{p}={_big(rng) if rng.random() < 0.6 else rng.randint(1, 8)}"]
        if len(argv) == 1:
            argv += ["-D", f"{mat.params[name][0]}={_big(rng)}"]
        return Case(i, "size", {}, argv)
    n = _big(rng)
    text = rng.choice(
        [
            f"ranks {n}\nrank 0: 0F0 0B0\n",
            f"microbatches {n}\nrank 0: 0F0 0B0\n",
            f"stages {n}\nrank 0: 0F0 0B0\n",
            f"rank {n - 1}: 0F0 0B0\n",
            f"rank 0: {n - 1}F0 0B0\n",
            f"rank 0: 0F{n - 1} 0B{n - 1}\n",
            f"ranks 1\nrank 0: 0F0 0F{n - 1} 0B0 0B{n - 1}\n",
            f"ranks 2\nrank 0: 0F0 0SEND_F{n - 1}\nrank 1: 1RECV_F{n - 1} 1F0\n",
            "schedule s(P = 2, M = 4)\nranks P\nmicrobatches M\nprogram r { F(0) B(0) }\n",
            f"schedule s(P = 2, M = 4)\nranks P\nstages P * {n}\nmicrobatches M\n"
            "program r { F(0) B(0) }\n",
        ]
    )
    argv = ["{dir}/s.pps"]
    if text.startswith("schedule"):
        argv += ["-D", f"{rng.choice('PM')}={n}"]
    return Case(i, "size", {"s.pps": text.encode()}, argv)


REPRODUCERS = [  # issue 19's front-end reproducers (default caps)
    ({"a.pps": b"ranks 1\nrank 0: 0F99999999999 0B99999999999\n"}, ["{dir}/a.pps"]),
    (
        {"a.pps": b"schedule two(M = 1)\nranks 1\nmicrobatches M\nprogram r { F(0) B(0) }\n"},
        ["{dir}/a.pps", "-D", "M=1000000000"],
    ),
    ({}, ["1f1b", "-D", "P=2", "-D", "M=100000000"]),
    ({"a.pps": b"let q = pending_w(0)\n" + BODY.encode()}, ["{dir}/a.pps"]),
    ({"a.pps": b"let x = " + b"7" * 5000 + b"\n" + BODY.encode()}, ["{dir}/a.pps"]),
    ({"a.pps": b""}, ["{dir}/a.pps"]),
    ({"a.pps": b"ranks 1\n\xff\xfe\n"}, ["{dir}/a.pps"]),
    ({"a.pps": ("let x = " + "-" * 5000 + "1\n" + BODY).encode()}, ["{dir}/a.pps"]),
    (
        {
            "a.pps": (
                "rank 0: " + " ".join(f"0F{m} 0B{m}" for m in range(10000)) + " 0F3\n"
            ).encode()
        },
        ["{dir}/a.pps"],
    ),
]
KNOWN_REPRODUCERS = [  # issue 19's, slow only because of the lead's files (KNOWN_SLOW)
    ({}, ["gpipe", "-D", "P=65536", "-D", "M=3"]),  # analysis/order.py PlanCosts.uniform
    ({"a.pps": b"ranks 1\nmicrobatches 2500000\nrank 0: 0F0 0B0\n"}, ["{dir}/a.pps"]),  # structure
]
GENERATORS = [  # (category, generator, how many per 6,000)
    ("mutation", gen_mutation, 2300),
    ("literal", gen_literal, 800),
    ("csv", gen_csv, 300),
    ("bytes", gen_bytes, 800),
    ("empty", gen_empty, 100),
    ("huge", gen_huge, 600),
    ("deep", gen_deep, 500),
    ("size", gen_size, 600),
]


def generate(seed: int, count: int, mat: Material | None = None, known: bool = True) -> list[Case]:
    """``count`` cases (the reproducers first; ``known=False`` leaves out those known to be
    slow), the same for the same seed and count."""
    mat = mat or Material()
    repro = REPRODUCERS + (KNOWN_REPRODUCERS if known else [])
    cases = [Case(i, "repro", f, a) for i, (f, a) in enumerate(repro)]
    total = sum(n for _, _, n in GENERATORS)
    plan = []
    for _cat, gen, n in GENERATORS:
        plan += [gen] * max(1, round(n * max(count - len(cases), 0) / total))
    rng = random.Random(seed)
    rng.shuffle(plan)
    for gen in plan[: max(count - len(cases), 0)]:
        case_rng = random.Random(rng.getrandbits(64))
        cases.append(gen(case_rng, mat, len(cases)))
    return cases


# ------------------------------------------------------------------ running
def _worker(conn, limit: float, dump_path: str) -> None:
    import faulthandler
    import resource

    from ppir.cli import main

    creators = _track_unlocated()
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
    dump = open(dump_path, "w")  # noqa: SIM115 - faulthandler needs an open file
    while True:
        msg = conn.recv()
        if msg is None:
            return
        case: Case = msg
        with tempfile.TemporaryDirectory() as folder:
            for name, data in case.files.items():
                with open(os.path.join(folder, name), "wb") as f:
                    f.write(data)
            err, out = io.StringIO(), io.StringIO()
            creators.clear()
            dump.seek(0)
            dump.truncate()
            faulthandler.dump_traceback_later(limit, file=dump)
            t0 = time.perf_counter()
            code, escaped = None, None
            try:
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                    code = main(case.command(folder))
            except BaseException:  # noqa: BLE001 - what the fuzz looks for
                escaped = traceback.format_exc()
            elapsed = time.perf_counter() - t0
            faulthandler.cancel_dump_traceback_later()
            text = err.getvalue().replace(folder, "<dir>")
        conn.send((case.index, code, text, escaped, elapsed, dict(creators)))


def _track_unlocated() -> dict[str, str]:
    """message -> the ppir file that made it, for every Diagnostic made without a span."""
    from ppir.diagnostics import Diagnostic

    made: dict[str, str] = {}
    init = Diagnostic.__init__

    def tracked(self, *args, **kw):
        init(self, *args, **kw)
        if self.span is None:
            made.setdefault(self.message, _innermost_ppir(traceback.format_stack()[-2]))

    Diagnostic.__init__ = tracked
    return made


_HEADER = re.compile(r"^(?P<loc>[^\s|].*?): (?P<sev>error|warning): (?P<msg>.*)$")
_LOC = re.compile(r".+:\d+:\d+$")


def classify(
    code, text: str, escaped: str | None, elapsed: float, limit: float, creators=None
) -> list[str]:
    """The problems of one run (empty when it behaved).  ``creators`` maps the message of a
    diagnostic made without a span to the file that made it: those made in the lead's files
    are counted as ``unlocated-lead``, apart."""
    found = []
    if escaped is not None or "Traceback (most recent call last)" in text:
        found.append("traceback")
    if elapsed > limit:
        found.append("over-limit")
    if code not in (0, 1, 2, None):
        found.append("exit-status")
    lines = text.splitlines()
    for k, line in enumerate(lines):
        if len(line) > 400:
            found.append("overlong-line")
        m = _HEADER.match(line)
        if not m or line.startswith(("note:", "hint:")):
            continue
        loc, msg = m.group("loc"), m.group("msg")
        if loc == "ppir":
            if msg.startswith(("-D ", "torch:")) or "(-D " in msg:
                continue  # names the command-line value
            maker = (creators or {}).get(msg, "?")
            if msg.startswith("... and "):
                found.append("known-capped-summary")
            elif maker.startswith(LEAD_FILES):
                found.append("unlocated-lead")
            else:
                found.append("unlocated")
        elif not _LOC.match(loc):
            found.append("unlocated")
        elif not (
            k + 2 < len(lines) + 1
            and k + 1 < len(lines)
            and re.match(r"^\s*\d+ \| ", lines[k + 1])
            and k + 2 < len(lines)
            and "^" in lines[k + 2]
        ):
            found.append("no-caret")
    return sorted(set(found))


def _innermost_ppir(stack: str) -> str:
    for line in stack.splitlines():
        m = re.search(r'File "([^"]*?/(ppir|backends)/[^"]+)", line (\d+)', line)
        if m:
            path = m.group(1)
            return path[path.rindex(f"/{m.group(2)}/") + 1 :] + ":" + m.group(3)
    return "?"


class Runner:
    def __init__(self, limit: float):
        self.limit = limit
        self.ctx = mp.get_context("fork")
        self.dump = tempfile.NamedTemporaryFile(prefix="fuzz-stack-", delete=False).name
        self._start()

    def _start(self):
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child, self.limit, self.dump))
        self.proc.start()

    def run(self, case: Case) -> dict:
        """One case: exit code, stderr, escaped traceback, seconds, the stack at the limit and
        the makers of span-less diagnostics."""
        self.conn.send(case)
        hard = 2 * self.limit
        res = {"code": None, "text": "", "escaped": None, "elapsed": hard, "stack": ""}
        res["creators"] = {}
        if not self.conn.poll(hard):
            res["stack"] = _read(self.dump)
            self._restart()
            return res
        try:
            _, code, text, escaped, elapsed, creators = self.conn.recv()
        except EOFError:  # the worker died (e.g. killed for memory)
            self._restart()
            return {**res, "escaped": "worker died", "elapsed": 0.0}
        stack = _read(self.dump) if elapsed > self.limit else ""
        return {
            "code": code,
            "text": text,
            "escaped": escaped,
            "elapsed": elapsed,
            "stack": stack,
            "creators": creators,
        }

    def _restart(self):
        self.proc.kill()
        self.proc.join()
        self._start()

    def close(self):
        with contextlib.suppress(OSError, BrokenPipeError):
            self.conn.send(None)
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
        os.unlink(self.dump)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def run_cases(cases: list[Case], limit: float, progress=None) -> list[dict]:
    """Run every case; one dict per case with its problems (``problems``) and timing."""
    runner = Runner(limit)
    results = []
    try:
        for k, case in enumerate(cases):
            res = runner.run(case)
            problems = classify(
                res["code"], res["text"], res["escaped"], res["elapsed"], limit, res["creators"]
            )
            where = _innermost_ppir(res.get("stack") or res["escaped"] or "")
            memory = "MemoryError" in (res["escaped"] or "")
            if "over-limit" in problems or memory:
                known = next((v for f, v in KNOWN_SLOW.items() if where.startswith(f)), None)
                if known:
                    drop = ("over-limit", "traceback")
                    problems = [p for p in problems if p not in drop] + ["known-slow"]
            results.append(
                {
                    **res,
                    "index": case.index,
                    "category": case.category,
                    "problems": problems,
                    "where": where,
                }
            )
            if progress and (k + 1) % progress == 0:
                bad = sum(1 for r in results if set(r["problems"]) - {"known-slow"})
                print(f"  {k + 1}/{len(cases)} run, {bad} with problems", file=sys.stderr)
    finally:
        runner.close()
    return results


def summarize(results: list[dict], limit: float) -> dict:
    by: dict[str, int] = {}
    for r in results:
        for p in r["problems"]:
            by[p] = by.get(p, 0) + 1
    slowest = max(results, key=lambda r: r["elapsed"])
    return {
        "inputs": len(results),
        "tracebacks": by.get("traceback", 0),
        "over_limit": by.get("over-limit", 0),
        "unlocated": by.get("unlocated", 0),
        "no_caret": by.get("no-caret", 0),
        "overlong_line": by.get("overlong-line", 0),
        "exit_status": by.get("exit-status", 0),
        "known_slow": by.get("known-slow", 0),
        "known_capped_summary": by.get("known-capped-summary", 0),
        "unlocated_lead": by.get("unlocated-lead", 0),
        "limit_s": limit,
        "slowest_s": round(slowest["elapsed"], 2),
        "slowest_input": slowest["index"],
        "exit_codes": {
            str(c): sum(1 for r in results if r["code"] == c)
            for c in sorted({r["code"] for r in results}, key=str)
        },
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=19)
    ap.add_argument("--count", type=int, default=6000)
    ap.add_argument("--limit", type=float, default=10.0, help="seconds per input (default 10)")
    ap.add_argument("--only", help="comma-separated input indices to run")
    ap.add_argument("--save", metavar="DIR", help="write each problem input (files + argv) here")
    ap.add_argument("--json", metavar="PATH", help="write the per-input results here")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    cases = generate(args.seed, args.count)
    if args.only:
        keep = {int(x) for x in args.only.split(",")}
        cases = [c for c in cases if c.index in keep]
    print(f"{len(cases)} inputs (seed {args.seed}), limit {args.limit:g} s", file=sys.stderr)
    results = run_cases(cases, args.limit, progress=500)
    summary = summarize(results, args.limit)
    summary["wall_s"] = round(time.perf_counter() - t0, 1)
    bad = [r for r in results if r["problems"]]
    for r in bad:
        case = cases[[c.index for c in cases].index(r["index"])]
        print(
            f"input {r['index']} [{r['category']}] {','.join(r['problems'])} "
            f"{r['elapsed']:.1f}s at {r['where']}: ppir {' '.join(case.command('<dir>'))[:200]}"
        )
        if args.save:
            folder = os.path.join(args.save, f"input{r['index']}")
            os.makedirs(folder, exist_ok=True)
            for name, data in case.files.items():
                with open(os.path.join(folder, name), "wb") as f:
                    f.write(data)
            with open(os.path.join(folder, "result.txt"), "w") as f:
                f.write(" ".join(case.command(folder)) + "\n")
                f.write(json.dumps({k: r[k] for k in ("code", "elapsed", "problems", "where")}))
                f.write("\n" + (r["escaped"] or "") + r["text"][:20000] + (r.get("stack") or ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "results": results}, f, indent=1)
    print(json.dumps(summary, indent=1))
    failing = ("tracebacks", "over_limit", "unlocated", "no_caret", "overlong_line", "exit_status")
    return 1 if any(summary[k] for k in failing) else 0


if __name__ == "__main__":
    sys.exit(main())
