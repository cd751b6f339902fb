"""Inputs for bench/fuzz_frontend.py: seeded generators of .pps, literal and CSV schedules,
bytes, huge literals, deep nesting and big sizes (see that script's docstring for the
categories).  ``generate(seed, count)`` gives the same cases for the same seed and count."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

FUZZ_CAPS = ["--max-ops", "20000", "--max-steps", "2000000"]
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
            self.literals.append(format_pps(OverlapComms().apply(low)))
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
KNOWN_REPRODUCERS = [  # issue 19's valid schedules that are real work, not hangs
    # 393,216 compute ops and 393,210 messages: over a million lowered ops, about 30-45 s
    ({}, ["gpipe", "-D", "P=65536", "-D", "M=3"]),
    ({"a.pps": b"ranks 1\nmicrobatches 2500000\nrank 0: 0F0 0B0\n"}, ["{dir}/a.pps"]),  # O(S x M)
]


def is_known_reproducer(case: Case) -> bool:
    """Whether ``case`` is one of :data:`KNOWN_REPRODUCERS` (reported apart when over the
    limit, by name: never by where its stack was)."""
    return case.category == "repro" and any(
        case.files == files and case.argv == argv for files, argv in KNOWN_REPRODUCERS
    )


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
