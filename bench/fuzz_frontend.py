"""Seeded robustness fuzz of ``ppir check``: whatever the input, a located diagnostic, in time.

    python bench/fuzz_frontend.py [--seed 19] [--count 6000] [--limit 10]
                                  [--only I[,J...]] [--save DIR] [--json PATH]

Generates ``--count`` inputs from ``--seed`` (input i is the same for a given seed and count,
whatever else runs) and runs ``ppir check`` on each, in-process, in a worker process that is
killed and replaced when an input runs past the hard limit (``2 x --limit``).  The inputs come
from bench/fuzz_inputs.py; categories:

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
  repro     issue 19's reproducers, verbatim (two of them valid schedules of real work,
            ``fuzz_inputs.KNOWN_REPRODUCERS``)

``mutation``, ``literal``, ``csv``, ``bytes``, ``empty`` and ``deep`` run under the fuzz caps
``--max-ops 20000 --max-steps 2000000`` (a mutated number may ask for a valid schedule of
millions of ops, which is work, not a hang: ppir's time is linear in ops, about 0.3 ms of CPU per
op of a check here, so the caps bound every input's time); ``huge``, ``size`` and ``repro`` run
under the default caps, so that what the caps must refuse before any work is refused there.
Times are the worker's CPU seconds (the machine may be shared); a worker still busy after
``3 x --limit`` seconds of wall-clock time is killed and the input counted over the limit.

Per input it reports: a traceback (an exception escaping ``ppir.cli.main``, or "Traceback" in
its output); over the limit (seconds, with the innermost ppir frame of the stack at the limit);
a diagnostic without ``file:line:col`` (``ppir: error:`` lines are allowed only for ``-D``
values, which they name); a located diagnostic without its quoted line and caret; an output
line over 400 characters; an exit status other than 0, 1 or 2.  The known reproducers
(``KNOWN_REPRODUCERS``: valid schedules of over a million lowered ops) are counted apart as
``known-slow`` when over the limit; any other input over the limit is a problem, wherever its
stack was.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing as mp
import os
import re
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuzz_inputs import Case, Material, generate, is_known_reproducer  # noqa: E402, F401

LEAD_FILES = (  # the compile path after expansion: a diagnostic without a span made there is
    "ppir/verify/",  # counted apart (unlocated-lead) and listed
    "ppir/analysis/",
    "ppir/passes/",
    "ppir/ir/graph.py",
    "ppir/ir/units.py",
    "ppir/ir/deps.py",
    "ppir/pipeline.py",
)


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
            t0, w0 = time.process_time(), time.perf_counter()
            code, escaped = None, None
            try:
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                    code = main(case.command(folder))
            except BaseException:  # noqa: BLE001 - what the fuzz looks for
                escaped = traceback.format_exc()
            elapsed = time.process_time() - t0  # CPU seconds: other load does not count
            wall = time.perf_counter() - w0
            faulthandler.cancel_dump_traceback_later()
            text = err.getvalue().replace(folder, "<dir>")
        conn.send((case.index, code, text, escaped, elapsed, wall, dict(creators)))


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
        hard = 3 * self.limit  # wall-clock seconds before the worker is killed
        res = {"code": None, "text": "", "escaped": None, "elapsed": hard, "wall": hard}
        res["stack"] = ""
        res["creators"] = {}
        if not self.conn.poll(hard):
            res["stack"] = _read(self.dump)
            self._restart()
            return res
        try:
            _, code, text, escaped, elapsed, wall, creators = self.conn.recv()
        except EOFError:  # the worker died (e.g. killed for memory)
            self._restart()
            return {**res, "escaped": "worker died", "elapsed": 0.0}
        stack = _read(self.dump) if elapsed > self.limit else ""
        return {
            "code": code,
            "text": text,
            "escaped": escaped,
            "elapsed": elapsed,
            "wall": wall,
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
            if ("over-limit" in problems or memory) and is_known_reproducer(case):
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
        "slowest_wall_s": round(max(r.get("wall", 0.0) for r in results), 2),
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
