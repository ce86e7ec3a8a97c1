"""Benchmark the full release build: wall time and peak memory next to the rendering floor
(prints figures; no asserts).

    python scripts/benchmark_build.py [--processes N]

Targets: the whole release (every config, images, gates, export) in under 20 s on a 2-core
machine (issue 9), and within 2x of the floor (issue 13): cairosvg rendering of the same
distinct SVG documents alone (no PNG cache), serially, in this process, measured in the same run.
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import datasets  # noqa: E402

from exbind import ExBind  # noqa: E402
from generator.render import cache_dir, cache_enabled, rasterize_uncached  # noqa: E402
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
    svgs = {}
    for records in rel.configs.values():
        for rec in records:
            if rec.case.render_svg is not None:
                svgs.setdefault(hashlib.sha256(rec.case.render_svg.encode()).hexdigest(), rec.case.render_svg)
    t3 = time.perf_counter()
    for svg in svgs.values():
        rasterize_uncached(svg)
    floor = time.perf_counter() - t3
    self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    rows = sum(len(v) for v in rel.configs.values())
    print(f"generate + gate: {t1 - t0:6.2f} s  ({rows} rows over {len(rel.configs)} configs)")
    print(f"export (builder + parquet + card + manifest): {t2 - t1:6.2f} s")
    print(f"total wall time: {t2 - t0:6.2f} s  (target < 20 s on 2 cores)")
    print(f"floor: cairosvg alone on the same {len(svgs)} distinct SVGs: {floor:6.2f} s; "
          f"build / floor = {(t2 - t0) / floor:.2f}x  (target <= 2x)")
    print(f"PNG cache: {f'on ({cache_dir()})' if cache_enabled() else 'off'} (EXBIND_RENDER_CACHE=0 turns it off; "
          "an empty EXBIND_CACHE_DIR gives a cold build)")
    print(f"peak RSS: main process {self_kb / 1024:.0f} MiB, largest worker {child_kb / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
