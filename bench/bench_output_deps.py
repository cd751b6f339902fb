"""What a progress/table library costs ppir's command line: import time and installed size.

    python bench/bench_output_deps.py [--repeat 15]

Peers, side by side in one run (each one that is installed; ``pip install rich`` to compare):
  tqdm           ``import tqdm`` (what ppir.cli.output imports when it draws a bar)
  rich.table     ``import rich.table, rich.console`` (a table printed through a Console)
  rich.progress  ``import rich.progress``
Each repeat starts a fresh interpreter that first imports ``ppir.cli.main`` and
``importlib.metadata`` (what every ppir command has loaded already), then times the peer's import
alone; the peers alternate within each repeat.  Reported: min and median milliseconds, the ratio
of each to tqdm, and the size on disk of the peer with its dependencies.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import statistics
import subprocess
import sys
from pathlib import Path

PEERS = {
    "tqdm": ("import tqdm", ["tqdm"]),
    "rich.table": ("import rich.table, rich.console", ["rich", "pygments", "markdown-it-py"]),
    "rich.progress": ("import rich.progress", ["rich", "pygments", "markdown-it-py"]),
}
TIMER = (
    "import ppir.cli.main, importlib.metadata, time\n"
    "t = time.perf_counter()\n"
    "{stmt}\n"
    "print(time.perf_counter() - t)"
)


def _size_mb(dists: list[str]) -> float:
    """Installed size of the distributions and their requirements (transitively), in MB."""
    seen: set[str] = set()
    todo = list(dists)
    total = 0
    while todo:
        name = todo.pop().lower()
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for f in dist.files or []:
            p = Path(dist.locate_file(f))
            if p.is_file():
                total += p.stat().st_size
        for req in dist.requires or []:
            if "extra ==" not in req:
                todo.append(req.split(";")[0].split("[")[0].split(">")[0].split("=")[0].strip())
    return total / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    peers = {k: v for k, v in PEERS.items() if importlib.util.find_spec(k.split(".")[0])}
    times: dict[str, list[float]] = {k: [] for k in peers}
    for _ in range(args.repeat):
        for name, (stmt, _) in peers.items():
            out = subprocess.run(
                [sys.executable, "-c", TIMER.format(stmt=stmt)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            times[name].append(float(out) * 1e3)
    base = min(times["tqdm"]) if "tqdm" in times else None
    print(f"{'peer':<14}  {'min ms':>7}  {'median ms':>9}  {'min/tqdm':>8}  {'size MB':>7}")
    for name, ts in times.items():
        ratio = f"{min(ts) / base:.1f}x" if base else "-"
        size = _size_mb(peers[name][1])
        print(
            f"{name:<14}  {min(ts):>7.1f}  {statistics.median(ts):>9.1f}  {ratio:>8}  {size:>7.1f}"
        )
    missing = sorted(set(PEERS) - set(peers))
    if missing:
        print(f"(not installed: {', '.join(missing)})")


if __name__ == "__main__":
    main()
