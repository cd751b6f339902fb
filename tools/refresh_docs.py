"""Re-run the ``$ ppir ...`` commands quoted in Markdown code blocks and refresh their output.

Usage: python tools/refresh_docs.py README.md docs/*.md

A block's output is everything after its ``$ ppir`` line up to the next ``$`` line or the end of
the block.  Where the quoted output elides lines with a ``...`` line, the same number of leading
and trailing lines is kept around it.  Numbers in the docs therefore always come from ppir.
"""

from __future__ import annotations

import shlex
import subprocess
import sys


def run(cmd: str) -> list[str]:
    """The output of ``cmd`` (a ``ppir ...`` line) run with this interpreter's ppir, so that no
    ``ppir`` command need be on PATH (``python -m ppir`` is the same program)."""
    argv = shlex.split(cmd)
    r = subprocess.run(
        [sys.executable, "-m", "ppir", *argv[1:]], capture_output=True, text=True, timeout=600
    )
    return (r.stdout + r.stderr).rstrip("\n").splitlines()


def refresh(text: str) -> str:
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    in_block = False
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            in_block = not in_block
            out.append(line)
            i += 1
            continue
        if in_block and line.startswith("$ ppir "):
            out.append(line)
            j = i + 1
            while j < len(lines) and not lines[j].startswith(("$ ", "```")):
                j += 1
            old = lines[i + 1 : j]
            while old and not old[-1]:  # the blank line before the next '$' is no output
                old = old[:-1]
            new = run(line[2:])
            if "..." in old:
                k = old.index("...")
                tail = len(old) - k - 1
                new = new[:k] + ["..."] + (new[-tail:] if tail else [])
            out.extend(new)
            if j < len(lines) and lines[j].startswith("$ ") and (not new or new[-1] != ""):
                out.append("")
            i = j
            continue
        out.append(line)
        i += 1
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    for path in sys.argv[1:]:
        with open(path) as f:
            old = f.read()
        new = refresh(old)
        if new != old:
            with open(path, "w") as f:
                f.write(new)
            print(f"refreshed {path}")
