"""Benchmark the release build next to its floors, measured in the same run (prints figures;
no asserts; issue 13 items 3-5).

    python scripts/benchmark_build.py                  # every row below (the 100k build takes minutes)
    python scripts/benchmark_build.py --sized-scale 0  # skip the sized text builds

Rows:

- ``build --processes 1`` and ``--processes 2``, each with a cold and a warm render cache
  (``EXBIND_CACHE_DIR`` pointed at a fresh folder, then reused), against the floor: cairosvg
  rendering of the same distinct SVG documents alone, serially, in this process (median of
  three); and the command as a user types it, ``python exbind.py build --quiet``, cold and
  warm, three times each (medians and ranges);
- sized text builds (``--configs`` the four text configs, ``--scale 2``: 1,440 rows, and
  ``--scale 139``: 100,080 rows): peak RSS of the main process and of the largest worker,
  and time per row of the streamed generate-gate-write phase (first row to last) and of the
  whole command. Targets: the 100k build under 1 GB, its time per row within 20% of the
  1k build's;
- the build's report (predictor tables) on a cold and a warm embedding cache over one of
  those exports, next to its floor, by ``scripts/benchmark_report.py`` (target: warm under
  8 s).

Every build runs in a fresh child process (so peak RSS is its own) and writes to a
temporary folder. Absolute times move with the machine's load; the ratios, measured side by
side, are the figures to quote.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TEXT_CONFIGS = "targeted_table,targeted_table_permuted,targeted_table_column_metadata,targeted_hierarchy"

# Runs one build in a child: times the whole export and the streamed row phase, reports peak RSS.
_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {repo!r})
import datasets
datasets.disable_progress_bars()
from composition.release import ReleaseRun
from publishing.export import export_release
marks = {{}}
class Timed(ReleaseRun):
    def records(self):
        for item in super().records():
            marks.setdefault("first", time.perf_counter())
            marks["rows"] = marks.get("rows", 0) + 1
            yield item
        marks["last"] = time.perf_counter()
t0 = time.perf_counter()
export_release({out!r}, lambda: Timed(processes={processes}, scale={scale}, configs={configs}, rows_only=True),
               show_progress=False)
t1 = time.perf_counter()
# VmHWM, not ru_maxrss: ru_maxrss survives fork + exec, so it would count the benchmark's own memory
hwm_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({{"total_s": t1 - t0, "rows": marks["rows"], "stream_s": marks["last"] - marks["first"],
                  "main_mib": hwm_kib / 1024,
                  "worker_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}}))
"""


def run_build(out: Path, processes: int, scale: int = 1, configs=None, cache: Path | None = None) -> dict:
    """One export in a fresh child process; returns its timings and peak RSS."""
    code = _CHILD.format(repo=str(REPO), out=str(out), processes=processes, scale=scale, configs=configs)
    env = dict(os.environ)
    if cache is not None:
        env["EXBIND_CACHE_DIR"] = str(cache)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    command_s = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"build failed:\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]), command_s=command_s)


def run_cli_build(out: Path, cache: Path) -> float:
    """Wall seconds of ``python exbind.py build --out OUT --quiet`` (the issue's measure: the
    command as typed, interpreter start, imports and exit included)."""
    env = dict(os.environ, EXBIND_CACHE_DIR=str(cache))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "exbind.py", "build", "--out", str(out), "--quiet"], capture_output=True,
                          text=True, env=env, cwd=REPO)
    if proc.returncode != 0:
        raise SystemExit(f"build failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t0


def render_floor(repeats: int = 3) -> tuple[list[float], int]:
    """Seconds to rasterize the release's distinct SVGs alone (serially), once per repeat,
    and their count."""
    from composition.release import build_release
    from generator.render import rasterize_uncached as rasterize

    rel = build_release(processes=2)
    svgs = {}
    for records in rel.configs.values():
        for rec in records:
            svg = getattr(rec.case, "render_svg", None)
            if svg is not None:
                svgs.setdefault(hashlib.sha256(svg.encode()).hexdigest(), svg)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for svg in svgs.values():
            rasterize(svg)
        times.append(time.perf_counter() - t0)
    return times, len(svgs)


def gate_table_scaling(sizes=(4_000, 16_000)) -> None:
    """``gate_table`` time per case below and above the parsed-reference cache (8,192 entries):
    one pass over distinct references should cost the same per case at any size."""
    from composition.release import build_release
    from generator.gates import gate_table

    rel = build_release(processes=2, configs=["broad", "targeted_table", "targeted_hierarchy"])
    base = [(r.reference_json(), r.case.instruction) for c in ("broad", "targeted_table", "targeted_hierarchy")
            for r in rel.configs[c]]
    per_case = {}
    for n in sizes:
        refs, instrs = [], []
        for k in range(n):  # distinct strings (a case id suffix), so every one is parsed
            ref, instr = base[k % len(base)]
            case_id = json.loads(ref)["case_id"]
            refs.append(ref.replace(f'"case_id":"{case_id}"', f'"case_id":"{case_id}#{k}"', 1))
            instrs.append(instr)
        t0 = time.perf_counter()
        gate_table(refs, instrs, {"attempted": n, "accepted": n, "rejected": {}})
        per_case[n] = (time.perf_counter() - t0) / n
    small, large = sizes
    print(f"gate_table per case: {1000 * per_case[small]:.3f} ms at {small} cases, {1000 * per_case[large]:.3f} ms "
          f"at {large} (ratio {per_case[large] / per_case[small]:.2f}; linear = 1)")


def report_release_builds(rows: list, cli: dict) -> None:
    """Print the default-release builds next to the rendering floor (medians of the repeats)."""
    floors, n_svgs = render_floor()
    floor = statistics.median(floors)
    print(f"floor: cairosvg alone on the release's {n_svgs} distinct SVGs, serially: {floor:6.2f} s "
          f"(median of {len(floors)}: {min(floors):.2f}-{max(floors):.2f} s)")
    for processes, state, r in rows:
        print(f"build --processes {processes}, {state} render cache: export {r['total_s']:6.2f} s "
              f"= {r['total_s'] / floor:.2f}x the floor (target <= 2x); whole command incl. interpreter start "
              f"and imports {r['command_s']:6.2f} s = {r['command_s'] / floor:.2f}x; {r['rows']} rows; "
              f"peak RSS main {r['main_mib']:.0f} MiB, largest worker {r['worker_mib']:.0f} MiB")
    for state in ("cold", "warm"):
        times = cli[state]
        median = statistics.median(times)
        print(f"python exbind.py build --quiet (default processes), {state} render cache: {median:6.2f} s = "
              f"{median / floor:.2f}x the floor (target <= 2x; median of {len(times)} runs: "
              f"{min(times):.2f}-{max(times):.2f} s = {min(times) / floor:.2f}-{max(times) / floor:.2f}x)")
    by = {(p, s): r["total_s"] for p, s, r in rows}
    print(f"--processes 2 / --processes 1 (export): cold {by[(2, 'cold')] / by[(1, 'cold')]:.2f}, "
          f"warm {by[(2, 'warm')] / by[(1, 'warm')]:.2f} (target < 1)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sized-scale", type=int, default=139,
                        help="scale of the large text build (139: 100,080 rows; 0 skips the sized builds)")
    parser.add_argument("--sized-only", action="store_true", help="only the sized text builds")
    parser.add_argument("--skip-report", action="store_true", help="skip the report row (benchmark_report.py)")
    parser.add_argument("--cli-repeats", type=int, default=3,
                        help="runs of the command as typed, cold and warm (medians are printed; default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="exbind-bench-") as tmp:
        tmp = Path(tmp)
        rows = []
        for processes in () if args.sized_only else (1, 2):
            cache = tmp / f"cache-{processes}"
            for state in ("cold", "warm"):
                rows.append((processes, state, run_build(tmp / f"out-{processes}-{state}", processes, cache=cache)))
        if rows:
            cli: dict = {"cold": [], "warm": []}
            for k in range(args.cli_repeats):  # a fresh render cache for each cold run, then reused warm
                for state in ("cold", "warm"):
                    cli[state].append(run_cli_build(tmp / f"cli-{k}-{state}", tmp / f"cache-cli-{k}"))
            report_release_builds(rows, cli)
            gate_table_scaling()
            if not args.skip_report:
                sys.stdout.flush()
                subprocess.run([sys.executable, str(REPO / "scripts" / "benchmark_report.py"),
                                "--export", str(tmp / "out-1-warm")], check=True)
        if args.sized_scale:
            small = run_build(tmp / "text-small", 2, scale=2, configs=TEXT_CONFIGS.split(","))
            large = run_build(tmp / "text-large", 2, scale=args.sized_scale, configs=TEXT_CONFIGS.split(","))
            for name, r in (("1k", small), ("100k", large)):
                print(f"text build {name}: {r['rows']} rows, {r['total_s']:7.1f} s total "
                      f"({1000 * r['total_s'] / r['rows']:.2f} ms/row), streamed phase "
                      f"{1000 * r['stream_s'] / r['rows']:.2f} ms/row; peak RSS main {r['main_mib']:.0f} MiB, "
                      f"largest worker {r['worker_mib']:.0f} MiB (target < 1024 MiB)")
            per_small = small["stream_s"] / small["rows"]
            per_large = large["stream_s"] / large["rows"]
            print(f"time per row, 100k / 1k (streamed phase): {per_large / per_small:.2f} (target <= 1.20); "
                  f"whole command: {(large['total_s'] / large['rows']) / (small['total_s'] / small['rows']):.2f}")


if __name__ == "__main__":
    main()
