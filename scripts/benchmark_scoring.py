"""Scoring throughput: the core scorer and the ``evaluate`` metric against a json.loads floor.

Usage (from the repository root)::

    python scripts/benchmark_scoring.py              # 100,000 predictions, every timing
    python scripts/benchmark_scoring.py --n 20000 --skip-evaluate

What it measures, in one run over the same prediction strings (a seeded, realistic mix over
real references of every family and format; see :func:`make_predictions`):

- ``floor``: ``json.loads`` of every prediction string (a failure counts as handled);
- ``core``: ``exbind_scoring.score_prediction`` on every (prediction, reference) pair,
  once with each record dropped (streamed) and once kept in a list, then one
  ``exbind_aggregate.aggregate`` over the kept records: kept + aggregate is what
  ``compute()`` runs after reading its Arrow cache (keeping 100k records costs cyclic
  garbage-collector passes over the whole process heap, so the kept figure grows with
  whatever else the process has loaded);
- ``evaluate``: ``evaluate.load(exbind_metric.py)``, ``add_batch`` in batches of
  ``--batch-size`` and one ``compute()``: the core work plus writing every prediction and
  reference string to evaluate's Arrow cache and reading them back (about half the time:
  references are a few kB each).

Each line prints predictions per second and the ratio of its time to the floor's time;
the project target is the core scorer within 5x of the floor. The timings are the best of
``--repeat`` runs, so the ``load_reference`` cache is warm (in real loops references repeat
across batches; their number is bounded by the dataset size, not by the predictions).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from exbind_aggregate import aggregate  # noqa: E402
from exbind_scoring import load_reference, score_prediction  # noqa: E402


def real_references(per_family: int = 6) -> list[str]:
    """Reference strings of ``per_family`` broad latents per family (every format) plus a few targeted."""
    from generator.release import broad_plans, generate_latent, targeted_plans

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
        except ValueError:
            pass


def score_streaming(preds: list[str], refs: list[str]) -> None:
    """score_prediction on every pair, each record dropped (a streaming consumer)."""
    for p, r in zip(preds, refs):
        score_prediction(p, r)


def score_kept(preds: list[str], refs: list[str]) -> list[dict]:
    """score_prediction on every pair, records kept in a list (what compute() holds)."""
    return [score_prediction(p, r) for p, r in zip(preds, refs)]


def through_evaluate(preds: list[str], refs: list[str], batch_size: int) -> dict:
    """evaluate.load by path, add_batch in batches, one compute()."""
    import evaluate

    cache = tempfile.mkdtemp(prefix="exbind-bench-")
    metric = evaluate.load(str(REPO_ROOT / "exbind_metric.py"), cache_dir=cache, experiment_id=uuid.uuid4().hex)
    for s in range(0, len(preds), batch_size):
        metric.add_batch(predictions=preds[s:s + batch_size], references=refs[s:s + batch_size])
    return metric.compute()


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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="number of predictions (default 100000)")
    ap.add_argument("--batch-size", type=int, default=1000, help="add_batch size for the evaluate run")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs for the in-process timings")
    ap.add_argument("--skip-evaluate", action="store_true", help="time only the floor and the core scorer")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of the core scorer")
    args = ap.parse_args(argv)

    references = real_references()
    preds, refs = make_predictions(references, args.n)
    families = sorted({load_reference(r)["family"] for r in references})
    formats = sorted({load_reference(r)["format"] for r in references})
    print(f"{args.n} predictions over {len(references)} references; families {families}; formats {formats}")

    t_floor = _time(lambda: floor(preds), args.repeat)
    t_stream = _time(lambda: score_streaming(preds, refs), args.repeat)
    kept: list = []
    t_kept = _time(lambda: kept.__setitem__(slice(None), score_kept(preds, refs)), args.repeat)
    result: dict = {}
    t_agg = _time(lambda: result.update(aggregate(kept)), args.repeat)
    rows = [
        ("json.loads floor", t_floor),
        ("core score_prediction (streamed)", t_stream),
        ("core score_prediction (kept)", t_kept),
        ("core aggregate (over kept records)", t_agg),
        ("core total = kept + aggregate", t_kept + t_agg),
    ]
    if not args.skip_evaluate:
        ev: dict = {}
        t_eval = _time(lambda: ev.update(through_evaluate(preds, refs, args.batch_size)))
        rows.append((f"evaluate add_batch({args.batch_size}) + compute", t_eval))
        if ev["n_exact"] != result["n_exact"] or ev["statuses"] != result["statuses"]:
            raise SystemExit("evaluate and the core scorer disagree")
    print(f"statuses {result['statuses']}; parse paths {result['parse_paths']}; "
          f"exact {result['exact_accuracy']:.3f}")
    print(f"{'path':<40}{'seconds':>9}{'pred/s':>12}{'x floor':>9}")
    for name, t in rows:
        print(f"{name:<40}{t:>9.3f}{args.n / t:>12,.0f}{t / t_floor:>9.2f}")
    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.runcall(lambda: aggregate(score_kept(preds, refs)))
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
