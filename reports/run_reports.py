"""Reports over run folders and inspect logs (issue 10 items 3 and 6).

- :func:`read_inspect_log`: the prediction lines of an inspect-ai log of the ``exbind`` task
  (``exbind.py score --inspect-log LOG``).
- :func:`score_run`: every config of a run folder (``<run>/<config>/predictions.jsonl`` +
  ``manifest.json``, as ``run-model`` writes them) scored into one table
  (``exbind.py score --run DIR``).
- :func:`compare_runs`: two run folders, per config present in both: each model's exact
  accuracy with its Wilson 95% interval, the paired difference B - A with the percentile
  bootstrap over parent cases (:func:`exbind_aggregate.paired_comparison`) and the
  first-violation transition matrix A -> B (the paper's Qwen2.5 / Qwen3 contrast, §6.3)
  (``exbind.py score --compare-runs A B``).

Decoding modes are never pooled: each row names its run's mode (``free`` for the
transformers runner and the default OpenAI backend; ``constrained-*`` controls are labelled).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Optional

from exbind_aggregate import paired_comparison, wilson_interval
from reports.report import format_table
from reports.score_report import build_report


class RunReportError(ValueError):
    """A run folder or inspect log that cannot be reported; the message says why."""


def read_inspect_log(path) -> tuple[str, list[dict]]:
    """Prediction lines from an inspect log of the ``exbind`` task.

    Returns:
        ``(config, [{"case_id", "config", "records_hash", "output"}])`` in log sample order;
        ``output`` is the sample's completion (``""`` when the sample has no output).

    Raises:
        RunReportError: the log is unreadable, holds no samples, mixes configs, or its
            samples are not ExBind samples (no ``case_id`` / ``config`` metadata).
    """
    from inspect_ai.log import read_eval_log

    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # inspect raises several types for a missing / foreign file
        raise RunReportError(f"{path}: not a readable inspect log ({type(exc).__name__}: {exc})") from None
    if not log.samples:
        raise RunReportError(f"{path}: the inspect log holds no samples (status {log.status})")
    lines, configs = [], set()
    for sample in log.samples:
        meta = sample.metadata or {}
        if "case_id" not in meta or "config" not in meta:
            raise RunReportError(f"{path}: sample {sample.id!r} is not an ExBind sample (no case_id/config metadata)")
        configs.add(meta["config"])
        completion = sample.output.completion if sample.output is not None else ""
        lines.append({"case_id": meta["case_id"], "config": meta["config"], "records_hash": meta.get("records_hash"),
                      "output": completion or ""})
    if len(configs) != 1:
        raise RunReportError(f"{path}: samples of several configs ({', '.join(sorted(configs))})")
    return configs.pop(), lines


def run_configs(run_dir) -> dict[str, dict]:
    """``{config: manifest}`` of a run folder's ``<config>/manifest.json`` files (sorted).

    Raises:
        RunReportError: the folder does not exist or holds no run.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        what = "is not a folder" if run_dir.exists() else "run folder not found"
        raise RunReportError(f"{run_dir}: {what} (a run folder holds the <config>/manifest.json "
                             "files that run-model writes)")
    out = {}
    for sub in sorted(p for p in run_dir.iterdir() if (p / "manifest.json").is_file()):
        manifest = json.loads((sub / "manifest.json").read_text(encoding="utf-8"))
        config = manifest.get("dataset", {}).get("config", sub.name)
        out[config] = {**manifest, "_dir": str(sub)}
    if not out:
        raise RunReportError(f"{run_dir}: no <config>/manifest.json inside (a run-model output folder per config)")
    return out


def decoding_mode(manifest: dict) -> str:
    """The run's decoding mode: ``decoding.mode`` (OpenAI backend) or ``"free"`` (greedy runner)."""
    return manifest.get("decoding", {}).get("mode", "free")


def _score(config: str, manifest: dict, export_dir, cache_dir) -> dict:

    report = build_report(config, export_dir, Path(manifest["_dir"]) / "predictions.jsonl", cache_dir=cache_dir,
                          allow_missing=True)
    return report


def score_run(run_dir, export_dir, cache_dir: Optional[str] = None) -> list[dict]:
    """Score every config of a run folder.

    Returns:
        One row per config: ``config``, ``mode``, ``model``, ``n``, ``n_valid``,
        ``n_exact``, ``exact_accuracy``, ``exact_ci`` (Wilson 95%), ``missing`` (cases
        without a prediction), ``failed`` (failed requests) and ``records``.

    Raises:
        RunReportError: see :func:`run_configs`; ScoreInputError from the scorer.
    """
    rows = []
    for config, manifest in run_configs(run_dir).items():
        report = _score(config, manifest, export_dir, cache_dir)
        s = report["summary"]
        rows.append({"config": config, "mode": decoding_mode(manifest),
                     "model": manifest.get("model") or manifest.get("model_path"), "n": s["n"],
                     "n_valid": s["n_valid"], "n_exact": s["n_exact"], "exact_accuracy": s["exact_accuracy"],
                     "exact_ci": wilson_interval(s["n_exact"], s["n"]), "missing": len(report["missing"]),
                     "failed": manifest.get("cases_failed", 0), "records": report["records"]})
    return rows


def transition_matrix(records_a: list[dict], records_b: list[dict]) -> dict[str, dict[str, int]]:
    """First-violation transitions A -> B over the case ids both hold: ``{label_a: {label_b: count}}``."""
    b = {r["case_id"]: r["first_violation"] for r in records_b}
    counts = Counter((r["first_violation"], b[r["case_id"]]) for r in records_a if r["case_id"] in b)
    out: dict[str, dict[str, int]] = {}
    for (la, lb), k in sorted(counts.items()):
        out.setdefault(la, {})[lb] = k
    return out


def compare_runs(run_a, run_b, export_dir, cache_dir: Optional[str] = None, resamples: int = 10000,
                 seed: int = 20260824) -> dict:
    """Compare two run folders config by config.

    Returns:
        ``{"a", "b", "configs": {config: {"a": row, "b": row, "paired": paired_comparison(A, B),
        "transitions": transition_matrix(A, B)}}, "only_a", "only_b"}`` (rows as
        :func:`score_run` without records; ``paired.delta`` = exact(B) - exact(A)).
    """
    a_rows = {r["config"]: r for r in score_run(run_a, export_dir, cache_dir)}
    b_rows = {r["config"]: r for r in score_run(run_b, export_dir, cache_dir)}
    configs = {}
    for config in sorted(set(a_rows) & set(b_rows)):
        ra, rb = a_rows[config], b_rows[config]
        configs[config] = {
            "a": {k: v for k, v in ra.items() if k != "records"},
            "b": {k: v for k, v in rb.items() if k != "records"},
            "paired": paired_comparison(ra["records"], rb["records"], resamples=resamples, seed=seed),
            "transitions": transition_matrix(ra["records"], rb["records"]),
        }
    return {"a": str(run_a), "b": str(run_b), "configs": configs, "only_a": sorted(set(a_rows) - set(b_rows)),
            "only_b": sorted(set(b_rows) - set(a_rows))}


def _ci(ci) -> str:
    return "n/a" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _rate(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def format_run_table(run_dir, rows: list[dict]) -> str:
    """The ``score --run`` table (one line per config; modes never pooled)."""
    body = [[r["config"], r["mode"], r["n"], f"{r['n_valid']}/{r['n']}", f"{r['n_exact']}/{r['n']}",
             _rate(r["exact_accuracy"]), _ci(r["exact_ci"]), r["missing"], r["failed"]] for r in rows]
    return format_table(["config", "decoding", "cases", "valid", "exact", "exact acc", "exact 95% CI (Wilson)",
                         "missing", "failed"], body, f"Run {run_dir}")


def format_comparison(result: dict) -> str:
    """The ``score --compare-runs`` tables: accuracy, paired difference, transitions per config."""
    parts = []
    for config, c in result["configs"].items():
        a, b, p = c["a"], c["b"], c["paired"]
        delta = "n/a" if p["delta"] is None else f"{p['delta']:+.3f}"
        rows = [["A", result["a"], a["mode"], f"{a['n_exact']}/{a['n']}", _ci(a["exact_ci"])],
                ["B", result["b"], b["mode"], f"{b['n_exact']}/{b['n']}", _ci(b["exact_ci"])],
                ["B - A", f"{p['parents']} paired parents", "-", delta, _ci(p["ci"])]]
        parts.append(format_table(["run", "folder", "decoding", "exact", "95% CI"], rows,
                                  f"{config}: exact accuracy (Wilson 95%) and paired difference "
                                  f"(parent-case bootstrap, {p['resamples']} resamples, seed {p['seed']}; "
                                  f"{p['improved']} improve, {p['regressed']} regress)"))
        labels_b = sorted({lb for row in c["transitions"].values() for lb in row})
        trows = [[la] + [row.get(lb, 0) for lb in labels_b] for la, row in c["transitions"].items()]
        parts.append(format_table(["A \\ B"] + labels_b, trows, f"{config}: first-violation transitions A -> B"))
    if result["only_a"] or result["only_b"]:
        parts.append(f"configs only in A: {', '.join(result['only_a']) or '-'}; "
                     f"only in B: {', '.join(result['only_b']) or '-'}")
    return "\n\n".join(parts)
