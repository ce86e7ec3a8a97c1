"""Throughput of the OpenAI-compatible backend against the local server (issue 10).

Usage (from the repository root; needs an export, ``python exbind.py build``)::

    python scripts/benchmark_backend.py [--export ./exbind] [--config targeted_table] \\
        [--latency 0.05] [--fault-rate 0.1] [--concurrency 1 4 16]

For each concurrency it starts ``python -m predictors.local_server`` (a separate process)
on 127.0.0.1 in front of the fast deterministic ``FirstCandidateModel`` (it answers the first
candidate id of the prompt after sleeping ``--latency`` seconds, a stand-in for decode
time; SmolLM2 on this CPU needs about 14 s per case, which would measure the model, not
the client), runs ``run_openai`` over every row of the config with an empty response
cache, and prints (over the run's wall time less the time spent reading the rows) requests per second, cases per second, retries and failures. Two passes:
``clean`` (no faults) and ``faults`` (a deterministic ``--fault-rate`` share of cases,
chosen by SHA-256 of the case id, get one HTTP 500 and then one HTTP 429 before answering;
the retries must absorb them: 0 failed cases). A third pass re-runs into a new folder
with the warm cache (0 requests).

Floors printed next to the figures: at concurrency c the clean pass should reach at least
``0.5 * c / latency`` requests per second up to 16 (half the ideal overlap), and no pass may
leave a failed case.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from predictors.openai_backend import load_png_rows, run_openai  # noqa: E402


def fault_plan(case_ids, rate: float) -> dict:
    """``{case_id: ["500", "429"]}`` for the cases whose SHA-256 falls under ``rate``."""
    chosen = [c for c in case_ids if int(hashlib.sha256(c.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < rate]
    return {c: ["500", "429"] for c in chosen}


def one_pass(export, config, concurrency, latency, plan, cache_dir, out_dir) -> dict:
    """Serve ``first-candidate`` from a separate process (its own interpreter and GIL) and run the config."""
    out_dir.mkdir(parents=True, exist_ok=True)
    faults = out_dir / "faults.json"
    faults.write_text(json.dumps(plan))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "predictors.local_server", "--model", "first-candidate",
                               "--served-model-name", "first-candidate", "--port", str(port),
                               "--latency", str(latency), "--faults", str(faults)], cwd=REPO_ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        server.stdout.readline()  # "serving ... at URL"
        manifest = run_openai("first-candidate", config, out_dir / "run", f"http://127.0.0.1:{port}/v1",
                              export_dir=export, concurrency=concurrency, timeout=30, max_retries=4, backoff=0.01,
                              response_cache=cache_dir, progress=False)
    finally:
        server.terminate()
        server.wait(timeout=10)
    session = manifest["sessions"][-1]
    wall = session["wall_time_s"] - session["load_time_s"]  # without reading the rows
    return {"concurrency": concurrency, "cases": manifest["cases_done"], "requests": session["requests"],
            "retries": manifest["retries"], "failed": manifest["cases_failed"], "cache_hits": manifest["cache_hits"],
            "wall_s": round(wall, 3), "load_s": session["load_time_s"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export", default="exbind")
    parser.add_argument("--config", default="targeted_table")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per completion (default 0.05)")
    parser.add_argument("--fault-rate", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--json", type=Path, help="write the figures as JSON")
    args = parser.parse_args(argv)

    rows, _ = load_png_rows(args.export, args.config)  # warm the datasets cache before timing
    plan = fault_plan([r["case_id"] for r in rows], args.fault_rate)
    print(f"{args.config}: {len(rows)} cases; latency {args.latency} s per completion; "
          f"{len(plan)} cases with faults (500 then 429) in the faults pass")
    results = []
    header = f"{'pass':8} {'conc':>4} {'cases':>5} {'requests':>8} {'retries':>7} {'failed':>6} {'cached':>6} " \
             f"{'wall s':>7} {'req/s':>7} {'case/s':>7} {'floor req/s':>11}"
    print(header)
    ok = True
    with tempfile.TemporaryDirectory(prefix="exbind-bench-") as tmp:
        for c in args.concurrency:
            for name, p in (("clean", {}), ("faults", plan)):
                cache = Path(tmp) / f"cache-{name}-{c}"
                r = one_pass(args.export, args.config, c, args.latency, p, cache, Path(tmp) / f"{name}-{c}")
                r["pass"] = name
                rps = r["requests"] / r["wall_s"]
                cps = r["cases"] / r["wall_s"]
                floor = 0.5 * min(c, 16) / args.latency if (name == "clean" and args.latency) else None
                ok &= r["failed"] == 0 and (floor is None or rps >= floor)
                r.update({"requests_per_s": round(rps, 2), "cases_per_s": round(cps, 2), "floor_requests_per_s": floor})
                results.append(r)
                print(f"{name:8} {c:>4} {r['cases']:>5} {r['requests']:>8} {r['retries']:>7} {r['failed']:>6} "
                      f"{r['cache_hits']:>6} {r['wall_s']:>7.2f} {rps:>7.1f} {cps:>7.1f} "
                      f"{'-' if floor is None else f'{floor:.1f}':>11}")
            warm = one_pass(args.export, args.config, c, args.latency, {}, Path(tmp) / f"cache-clean-{c}",
                            Path(tmp) / f"warm-{c}")
            warm["pass"] = "cached"
            results.append(warm)
            ok &= warm["requests"] == 0
            print(f"{'cached':8} {c:>4} {warm['cases']:>5} {warm['requests']:>8} {warm['retries']:>7} "
                  f"{warm['failed']:>6} {warm['cache_hits']:>6} {warm['wall_s']:>7.2f} {'-':>7} "
                  f"{warm['cases'] / warm['wall_s']:>7.1f} {'0 requests':>11}")
    print("floors met" if ok else "FLOOR MISSED")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
