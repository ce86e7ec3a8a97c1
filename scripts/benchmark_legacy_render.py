"""Benchmark the legacy bridge's rendering: ``bridge_records()`` with the PNG disk cache cold
(an empty cache folder) in 1 and 2 processes, warm, and off, next to the floor (cairosvg
alone on the same distinct SVGs, serially), each in a fresh interpreter, measured in the same
run (prints figures; no asserts).

    python scripts/benchmark_legacy_render.py [--rounds N]

Each figure is the fastest of N rounds (default 3) of the call alone (imports excluded).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FLOOR = """
import time
from generator.legacy.converter import read_legacy_jsonl
from generator.legacy.tasks import BRIDGE_FILE
from generator.render import rasterize_uncached
svgs = list(dict.fromkeys(i.svg for i in read_legacy_jsonl(BRIDGE_FILE)))
t = time.perf_counter()
for svg in svgs:
    rasterize_uncached(svg)
print(time.perf_counter() - t, len(svgs))
"""

BRIDGE = """
import sys, time
from generator.legacy.bridge import bridge_records
t = time.perf_counter()
records, _ = bridge_records(processes=int(sys.argv[1]))
print(time.perf_counter() - t, len(records))
"""


def _run(code: str, processes: int, cache: str, enabled: bool) -> tuple[float, int]:
    env = dict(os.environ, EXBIND_CACHE_DIR=cache, EXBIND_RENDER_CACHE="1" if enabled else "0",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code, str(processes)], env=env, cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), int(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure (the fastest is printed)")
    args = parser.parse_args()
    best: dict[str, float] = {}
    counts: dict[str, int] = {}
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as empty1, tempfile.TemporaryDirectory() as empty2:
            figures = {
                "floor": _run(FLOOR, 1, empty1, False),
                "cold, processes=1": _run(BRIDGE, 1, empty1, True),
                "cold, processes=2": _run(BRIDGE, 2, empty2, True),
                "warm, processes=2": _run(BRIDGE, 2, empty2, True),
                "cache off, processes=1": _run(BRIDGE, 1, empty1, False),
                "cache off, processes=2": _run(BRIDGE, 2, empty1, False),
            }
        for name, (seconds, n) in figures.items():
            best[name] = min(best.get(name, seconds), seconds)
            counts[name] = n
    floor = best.pop("floor")
    print(f"floor: cairosvg alone on the {counts['floor']} distinct legacy SVGs, serially: {floor:5.2f} s")
    for name, seconds in best.items():
        print(f"bridge_records() {name:<24} {seconds:5.2f} s  ({counts[name]} records; {seconds / floor:.2f}x the floor)")
    print(f"(fastest of {args.rounds} rounds, each call in a fresh interpreter; {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
