"""Benchmark the build's report (``print_release_report``) on a cold and a warm MiniLM
embedding cache, next to its floor (prints figures; no asserts).

    python exbind.py build --out /tmp/exb_report --no-report --quiet   # once, about 10 s
    python scripts/benchmark_report.py --export /tmp/exb_report [--repeat 2] [--with-off]

Every figure is measured in a fresh Python process (as ``exbind build`` prints the report)
over the same export, with ``EXBIND_CACHE_DIR`` set to a new temporary folder:

- floor: ``import datasets`` and loading every config once (the report's input; nothing
  the report does can be faster). A first, untimed load fills the ``datasets`` Arrow cache
  so that every timed run finds it warm.
- cold: the report with an empty embedding cache (MiniLM loads and encodes every text).
- warm: the report again; every embedding comes from the disk cache.
- off (``--with-off``): ``EXBIND_EMBEDDING_CACHE=0``, as before the cache existed.

The first column is the time from ``import datasets`` to the end (imports of the report's
modules, lazy ones included, and ``print_release_report``; the floor from the same point);
``process`` adds interpreter start-up. Warm and floor
are the best of ``--repeat`` runs. The printed tables of all runs must be identical (checked
and printed). Target (issue 13 item 3): the warm report under 8 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 8.0

_REPORT = """
import sys, time
t = time.perf_counter()
sys.path.insert(0, {root!r})
import datasets
datasets.disable_progress_bars()
from pathlib import Path
from reports.report import print_release_report
print_release_report(Path({export!r}))
sys.stderr.write("ELAPSED %r\\n" % (time.perf_counter() - t))
"""

_FLOOR = """
import sys, time
t = time.perf_counter()
sys.path.insert(0, {root!r})
import datasets
datasets.disable_progress_bars()
from composition.release import CONFIGS
from predictors.io import load_config_rows
rows = {{c: load_config_rows({export!r}, c) for c in CONFIGS}}
sys.stderr.write("ELAPSED %r\\n" % (time.perf_counter() - t))
"""


def _run(code: str, env: dict) -> tuple[float, float, str]:
    """Run ``code`` in a fresh interpreter; returns (inner seconds, process seconds, stdout)."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO_ROOT)
    wall = time.perf_counter() - t
    if proc.returncode:
        sys.exit(f"benchmark run failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    inner = [line for line in proc.stderr.splitlines() if line.startswith("ELAPSED ")]
    return float(inner[-1].split()[1]), wall, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--export", type=Path, required=True, help="an export folder (exbind build --out DIR)")
    parser.add_argument("--repeat", type=int, default=2, help="warm and floor runs; the best is printed (default 2)")
    parser.add_argument("--with-off", action="store_true", help="also time the report with the cache off")
    args = parser.parse_args()
    if not (args.export / "exbind_manifest.json").is_file():
        sys.exit(f"--export {args.export} is not an export folder; build one with "
                 f"`python exbind.py build --out {args.export} --no-report --quiet`")
    if args.repeat < 1:
        sys.exit("--repeat must be a positive integer")
    export = str(args.export.resolve())
    with tempfile.TemporaryDirectory(prefix="exbind-bench-cache-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "EXBIND_EMBEDDING_CACHE"}
        env["EXBIND_CACHE_DIR"] = cache
        floor_code = _FLOOR.format(root=str(REPO_ROOT), export=export)
        report_code = _REPORT.format(root=str(REPO_ROOT), export=export)
        _run(floor_code, env)  # fills the datasets Arrow cache; untimed
        floor = min(_run(floor_code, env)[:2] for _ in range(args.repeat))
        cold = _run(report_code, env)
        warms = [_run(report_code, env) for _ in range(args.repeat)]
        warm = min(warms)
        outputs = {"cold": cold[2], **{f"warm{i + 1}": w[2] for i, w in enumerate(warms)}}
        off = None
        if args.with_off:
            off = _run(report_code, {**env, "EXBIND_EMBEDDING_CACHE": "0"})
            outputs["off"] = off[2]
        shards = sorted(Path(cache).glob("embeddings/*/*.emb"))
        cached_bytes = sum(p.stat().st_size for p in shards)

    digests = {name: hashlib.sha256(text.encode()).hexdigest()[:16] for name, text in outputs.items()}
    identical = len(set(digests.values())) == 1
    print(f"cpus: {os.cpu_count()}  load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"floor (import datasets + load every config once): {floor[0]:6.2f} s   process {floor[1]:6.2f} s")
    print(f"report, cold embedding cache:                      {cold[0]:6.2f} s   process {cold[1]:6.2f} s")
    print(f"report, warm embedding cache (best of {args.repeat}):        {warm[0]:6.2f} s   process {warm[1]:6.2f} s")
    if off is not None:
        print(f"report, cache off (EXBIND_EMBEDDING_CACHE=0):      {off[0]:6.2f} s   process {off[1]:6.2f} s")
    print(f"warm / floor = {warm[0] / floor[0]:.2f}x; cold / warm = {cold[0] / warm[0]:.2f}x; "
          f"warm vs target: {warm[0]:.2f} s {'<' if warm[0] < TARGET_S else '>='} {TARGET_S:.0f} s"
          f" ({'met' if warm[0] < TARGET_S else 'NOT met'})")
    print(f"embedding cache: {len(shards)} shard(s), {cached_bytes / 2**20:.2f} MiB")
    print(f"printed report identical across runs: {'yes' if identical else 'NO'} {json.dumps(digests)}")


if __name__ == "__main__":
    main()
