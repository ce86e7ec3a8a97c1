"""Benchmark the full release build: wall time and peak memory (prints figures; no asserts).

    python scripts/benchmark_build.py [--processes N]

Target (issue 2): the whole release (every config, images, gates, export) in under 20 s
on a 2-core machine.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import datasets  # noqa: E402

from exbind import ExBind  # noqa: E402
from publishing.export import export_release  # noqa: E402
from composition.release import build_release  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=None, help="generation processes (default: up to 4)")
    args = parser.parse_args()
    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        rel = build_release(processes=args.processes)
        t1 = time.perf_counter()
        export_release(Path(tmp) / "exbind", ExBind, lambda: rel, show_progress=False)
        t2 = time.perf_counter()
    self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    rows = sum(len(v) for v in rel.configs.values())
    print(f"generate + gate: {t1 - t0:6.2f} s  ({rows} rows over {len(rel.configs)} configs)")
    print(f"export (builder + parquet + card + manifest): {t2 - t1:6.2f} s")
    print(f"total wall time: {t2 - t0:6.2f} s  (target < 20 s on 2 cores)")
    print(f"peak RSS: main process {self_kb / 1024:.0f} MiB, largest worker {child_kb / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
