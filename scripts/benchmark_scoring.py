"""Scoring figures next to their floors, measured in the same run (issue 13 items 1, 2, 5).

Usage (from the repository root)::

    python scripts/benchmark_scoring.py                    # every row below
    python scripts/benchmark_scoring.py --sizes 10000 --aggregate-sizes 100000 --skip-memory
    python scripts/benchmark_scoring.py --sizes "" --aggregate-sizes 100000,1000000 \\
        --skip-memory --skip-worst --distinct      # aggregate rows only, distinct records

Every row prints a figure, its floor and the ratio, over one seeded, realistic mix of
prediction strings on real references of every family and format
(:func:`make_predictions`):

- ``score_prediction``: microseconds per prediction against ``json.loads`` of the same
  strings (a failure counts as handled);
- ``aggregate`` at 100k and 1M records against one pass reading ``scores["exact"]``, and
  (a second line, for scale) against the plain one-pass loop collecting every counter
  (:func:`every_counter_pass`); 1M records repeat the scored 100k, so only aggregation is
  timed (``--distinct``: as distinct copies, see :func:`distinct_copies`);
- ``metric.compute(predictions, references)`` and ``add_batch`` (32 rows) + ``compute`` at
  10k and 100k predictions against the core path (``score_prediction`` on every pair,
  records kept, then ``aggregate``), results checked equal;
- peak memory (RSS, fresh child processes) of ``compute`` on 360k rows against the core
  path on the same rows;
- the hostile outputs of issue 11 item 2 (:func:`worst_cases`), each against
  ``json.loads`` of the same string.

Timings are the best of ``--repeat`` runs (the ``load_reference`` cache is warm, as in real
loops where references repeat across batches). On a shared machine the absolute times move
with the load; the ratios, measured side by side, are the figures to quote.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from exbind_aggregate import aggregate, wilson_interval  # noqa: E402
from exbind_scoring import load_reference, score_prediction  # noqa: E402


def real_references(per_family: int = 6) -> list[str]:
    """Reference strings of ``per_family`` broad latents per family (every format) plus a few targeted."""
    from composition.release import broad_plans, generate_latent, targeted_plans

    refs: list[str] = []
    counts: dict[str, int] = {}
    for plan in broad_plans():
        if counts.get(plan.family, 0) < per_family:
            counts[plan.family] = counts.get(plan.family, 0) + 1
            refs.extend(generate_latent(plan).references)
    seen = set()
    for plan in targeted_plans():
        if plan.condition not in seen:
            seen.add(plan.condition)
            refs.extend(generate_latent(plan).references)
    return refs


def _answer(ref: dict, rng: random.Random) -> dict:
    """A reference-shaped answer: gold, a random candidate, or an unknown id."""
    ids = [c["id"] for c in ref["candidates"]]
    roll = rng.random()
    if roll < 0.4:
        return dict(ref["gold"])
    if roll < 0.9:
        return {k: rng.choice(ids) for k in ref["output_keys"]}
    return {k: "zz_" + rng.choice(ids) for k in ref["output_keys"]}


def make_predictions(references: list[str], n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """``n`` (prediction, reference) pairs: a realistic mix of model-output shapes.

    About 55% strict JSON (compact or spaced, sometimes an alias key), 15% fenced,
    15% prose around an object, 5% echoed candidate rows or wrong shapes, 10% garbage
    (truncated JSON, plain prose, empty strings).
    """
    rng = random.Random(seed)
    parsed = [load_reference(r) for r in references]
    preds, refs = [], []
    for _ in range(n):
        i = rng.randrange(len(references))
        ref = parsed[i]
        answer = _answer(ref, rng)
        roll = rng.random()
        if roll < 0.45:
            text = json.dumps(answer)
        elif roll < 0.55:
            key = "id" if len(answer) == 1 else None
            text = json.dumps({key: next(iter(answer.values()))} if key else answer, separators=(",", ":"))
        elif roll < 0.70:
            text = "```json\n" + json.dumps(answer, indent=2) + "\n```"
        elif roll < 0.85:
            text = f"Looking at the candidates, the target is {json.dumps(answer)}. I am confident in this answer."
        elif roll < 0.90:
            text = json.dumps(rng.choice([{"candidate_id": rng.choice(ref["candidates"])["id"]}, [answer], "x"]))
        else:
            text = rng.choice([
                json.dumps(answer)[:-3],
                "I cannot determine the target from the observation.",
                "",
                "{cell_id: cell_r01_c01",
                "The answer is the red circle.",
            ])
        preds.append(text)
        refs.append(references[i])
    return preds, refs


def _time(fn, repeat: int = 1) -> float:
    """Best wall time of ``repeat`` calls of ``fn`` (seconds), each after a full collection."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def floor(preds: list[str]) -> None:
    """json.loads of every string; a failure counts as handled, results are dropped."""
    loads = json.loads
    for p in preds:
        try:
            loads(p)
        except (ValueError, RecursionError):
            pass


def score_streaming(preds: list[str], refs: list[str]) -> None:
    """score_prediction on every pair, each record dropped (a streaming consumer)."""
    for p, r in zip(preds, refs):
        score_prediction(p, r)


def score_kept(preds: list[str], refs: list[str]) -> list[dict]:
    """score_prediction on every pair, records kept in a list (what compute() holds)."""
    return [score_prediction(p, r) for p, r in zip(preds, refs)]


def load_metric():
    """``evaluate.load`` of the metric by path, in a fresh cache."""
    import evaluate

    return evaluate.load(str(REPO_ROOT / "exbind_metric.py"), cache_dir=tempfile.mkdtemp(prefix="exbind-bench-"),
                         experiment_id=uuid.uuid4().hex)


def through_compute(metric, preds: list[str], refs: list[str]) -> dict:
    """One ``metric.compute(predictions, references)``."""
    return metric.compute(predictions=preds, references=refs)


def through_add_batch(metric, preds: list[str], refs: list[str], batch_size: int = 32) -> dict:
    """``add_batch`` in batches of ``batch_size``, then one ``compute()``."""
    for s in range(0, len(preds), batch_size):
        metric.add_batch(predictions=preds[s:s + batch_size], references=refs[s:s + batch_size])
    return metric.compute()


def core_path(preds: list[str], refs: list[str]) -> dict:
    """What the evaluate path must match: score every pair (records kept), then aggregate."""
    return aggregate(score_kept(preds, refs))


def exact_floor(records: list[dict]) -> int:
    """One pass reading ``scores["exact"]`` (the aggregate's floor)."""
    return sum(r["scores"]["exact"] for r in records)


def distinct_copies(records: list[dict], n: int) -> list[dict]:
    """``n`` records cycling through ``records``: the records themselves, then distinct copies
    (pickle round trips), so that a pass over them touches ``n`` records' memory as a real
    run of ``n`` cases does; the default repeats the same objects, whose few cache lines a
    light pass keeps warm."""
    import pickle

    blob = pickle.dumps(records, protocol=pickle.HIGHEST_PROTOCOL)
    out = list(records)
    while len(out) < n:
        out.extend(pickle.loads(blob))
    return out[:n]


def every_counter_pass(records: list[dict]) -> dict:
    """The plain loop issue 13 item 2 names: one pass collecting every counter ``aggregate``
    reports (statuses, parse paths, kinds, first violations, violation sets, possible first
    violations, per-stage applicable/correct, n/valid/exact per format, family and
    condition; no survival or cross-format pairing), Wilson intervals once at the end."""
    statuses, paths, kinds, first, sets, possible = Counter(), Counter(), Counter(), Counter(), Counter(), Counter()
    applicable, correct = Counter(), Counter()
    groups: dict = {"format": {}, "family": {}, "condition": {}}
    n_valid = n_exact = 0
    for r in records:
        status = r["status"]
        statuses[status] += 1
        paths[r["parse_path"]] += 1
        kinds[r.get("kind", "reference")] += 1
        first[r["first_violation"]] += 1
        sets["+".join(r["violations"]) or "{}"] += 1
        for label in r["possible_first_violations"]:
            possible[label] += 1
        valid, exact = int(status == "valid"), 0
        for stage, score in r["scores"].items():
            applicable[stage] += 1
            correct[stage] += score
            if stage == "exact":
                exact = score
        n_valid += valid
        n_exact += exact
        for field, by_key in groups.items():
            row = by_key.setdefault(r.get(field), [0, 0, 0])
            row[0] += 1
            row[1] += valid
            row[2] += exact
    intervals = [wilson_interval(n_exact, len(records))]
    intervals += [wilson_interval(k, n) for by_key in groups.values() for n, _, k in by_key.values()]
    return {"statuses": statuses, "intervals": intervals}


def memory_child(path: str, n: int) -> int:
    """Child process body: peak RSS (MiB) of one path on ``n`` rows, printed as JSON."""
    references = real_references()
    preds, refs = make_predictions(references, n)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if path == "core":
        result = core_path(preds, refs)
    else:
        result = through_compute(load_metric(), preds, refs)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"path": path, "n": result["n"], "peak_mib": peak / 1024, "inputs_mib": base / 1024}))
    return 0


def measure_memory(n: int) -> dict:
    """Peak RSS (MiB) of the core path and of ``metric.compute`` on ``n`` rows, each in a fresh process."""
    out = {}
    for path in ("core", "evaluate"):
        proc = subprocess.run([sys.executable, __file__, "--memory-child", path, "--n", str(n)],
                              capture_output=True, text=True, check=True)
        out[path] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def worst_cases() -> list[tuple[str, str]]:
    """The hostile outputs of issue 11 item 2 (each once stalled scoring for seconds to minutes)."""
    head = '{"a":[' * 256
    return [
        ("'{\"a\":[' * 256 + '1,' * N, 1 MB", head + "1," * ((1_000_000 - len(head)) // 2)),
        ("'{\"a\":[' * 256 + '1,' * N, 10 MB", head + "1," * ((10_000_000 - len(head)) // 2)),
        ("10 MB of '{'", "{" * 10_000_000),
        ("10 MB of '{\"'", '{"' * 5_000_000),
        ("unclosed fence + 1 MB tag", "```" + "a" * 1_000_000),
        ("3000-deep object around the answer", '{"a": ' * 3000 + '{"cell_id": "x"}' + "}" * 3000),
    ]


def worst_case_rows(reference: str) -> list[tuple[str, float, float, str]]:
    """``(name, score_prediction seconds, json.loads seconds, status/parse_path)`` per worst case."""
    rows = []
    for name, text in worst_cases():
        record: dict = {}
        t_score = _time(lambda: record.update(score_prediction(text, reference)))
        t_floor = _time(lambda: floor([text]))
        rows.append((name, t_score, t_floor, f"{record['status']}/{record['parse_path']}"))
    return rows


def print_worst_cases(reference: str) -> None:
    """Print every worst case next to the json.loads floor of the same string."""
    print(f"{'worst-case prediction':<42}{'score s':>9}{'loads s':>9}{'x floor':>9}  result")
    for name, t_score, t_floor, outcome in worst_case_rows(reference):
        ratio = f"{t_score / t_floor:>9.2f}" if t_floor >= 1e-3 else f"{'(<1 ms)':>9}"
        print(f"{name:<42}{t_score:>9.3f}{t_floor:>9.3f}{ratio}  {outcome}")


def _row(name: str, seconds: float, floor_name: str, floor_seconds: float, per: int) -> None:
    ratio = seconds / floor_seconds if floor_seconds > 0 else float("inf")
    print(f"{name:<46}{seconds * 1e6 / per:>11.2f} us{floor_name:>34}{floor_seconds * 1e6 / per:>10.2f} us"
          f"{ratio:>8.2f}x")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000", help="prediction counts for the scoring and evaluate rows")
    ap.add_argument("--aggregate-sizes", default="100000,1000000", help="record counts for the aggregate rows")
    ap.add_argument("--memory-rows", type=int, default=360_000, help="rows of the memory row (default 360000)")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs for each timing")
    ap.add_argument("--skip-memory", action="store_true", help="skip the memory row (two child processes)")
    ap.add_argument("--distinct", action="store_true",
                    help="aggregate rows on distinct copies of the scored records (as a real run of that size holds) "
                         "instead of the same record objects repeated")
    ap.add_argument("--skip-worst", action="store_true", help="skip the worst-case predictions")
    ap.add_argument("--memory-child", choices=("core", "evaluate"), help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.memory_child:
        return memory_child(args.memory_child, args.n)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    agg_sizes = [int(x) for x in args.aggregate_sizes.split(",") if x]

    references = real_references()
    preds_all, refs_all = make_predictions(references, max(sizes + [min(agg_sizes, default=0), 1]))
    families = sorted({load_reference(r)["family"] for r in references})
    print(f"{len(references)} real references; families {families}; seeded prediction mix")
    print(f"{'path':<46}{'figure':>14}{'floor':>34}{'':>13}{'ratio':>8}")
    for n in sizes:
        preds, refs = preds_all[:n], refs_all[:n]
        t_floor = _time(lambda: floor(preds), args.repeat)
        t_score = _time(lambda: score_streaming(preds, refs), args.repeat)
        _row(f"score_prediction, {n:,} mixed", t_score, "json.loads(prediction)", t_floor, n)
        # core, compute and add_batch timed in interleaved rounds (best of each), so a change
        # in the machine's load hits all three alike; the metric is loaded and warmed first
        metric = load_metric()
        metric.compute(predictions=preds, references=refs)
        paths = {"core": lambda: core_path(preds, refs),
                 "metric.compute(predictions, references)": lambda: through_compute(metric, preds, refs),
                 "add_batch(32) + compute": lambda: through_add_batch(metric, preds, refs)}
        best = dict.fromkeys(paths, float("inf"))
        results: dict = {}
        for _ in range(args.repeat):
            for name, fn in paths.items():
                gc.collect()
                start = time.perf_counter()
                results[name] = fn()
                best[name] = min(best[name], time.perf_counter() - start)
        core = results["core"]
        for name in list(paths)[1:]:
            same = {k: v for k, v in results[name].items() if k in core} == core
            _row(f"{name}, {n:,}{'' if same else ' (DIFFERS)'}", best[name], "core score+aggregate", best["core"], n)
            if not same:
                raise SystemExit(f"{name} and the core path disagree at n={n}")
    if agg_sizes:
        base_n = min(agg_sizes)
        kept = score_kept(preds_all[:base_n], refs_all[:base_n])
        for n in agg_sizes:
            records = (kept * (n // base_n + 1))[:n] if not args.distinct else distinct_copies(kept, n)
            # interleaved rounds (best of each), as for the evaluate rows
            paths = {"floor": lambda: exact_floor(records), "aggregate": lambda: aggregate(records),
                     "every counter": lambda: every_counter_pass(records)}
            best = dict.fromkeys(paths, float("inf"))
            for _ in range(args.repeat):
                for name, fn in paths.items():
                    best[name] = min(best[name], _time(fn))
            _row(f"aggregate, {n:,} records", best["aggregate"], "one pass reading scores['exact']", best["floor"], n)
            _row(f"aggregate, {n:,} records", best["aggregate"], "one pass collecting every counter",
                 best["every counter"], n)
    if not args.skip_memory:
        mem = measure_memory(args.memory_rows)
        core_mib, eval_mib = mem["core"]["peak_mib"], mem["evaluate"]["peak_mib"]
        print(f"{'metric.compute peak RSS, ' + format(args.memory_rows, ',') + ' rows':<46}{eval_mib:>11.0f} MiB"
              f"{'core path peak RSS':>34}{core_mib:>10.0f} MiB{eval_mib / core_mib:>8.2f}x")
    if not args.skip_worst:
        print()
        print_worst_cases(next(r for r in references if load_reference(r)["family"] == "table"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
