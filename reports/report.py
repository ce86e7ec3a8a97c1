"""The main job's report: composition, gate tables (paper Table 6 form) and the four gate
baselines scored by the ExBind metric per config and format.

Scoring goes through the functions the ``evaluate`` metric calls
(:func:`exbind_scoring.score_prediction` per case, :func:`exbind_aggregate.aggregate` over
cases; :func:`score_outputs`), so the figures are the metric's and the report does not pay
for importing ``evaluate`` (which imports ``transformers.pipelines``: seconds). Each config
is loaded once (:func:`load_export_rows`) and shared by the sections; MiniLM embeddings come
from the disk cache when warm (:mod:`predictors.embedding_cache`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from tqdm.auto import tqdm

from generator.baselines import BASELINE_FUNCTIONS, random_expectation
from composition.release import CONFIGS
from publishing.export import export_configs

REPO_ROOT = Path(__file__).resolve().parent.parent
FORMAT_ORDER = ("svg", "canvas", "tree", "dom", "graph", "table")


def _fmt_rate(x) -> str:
    return "  n/a" if x is None else f"{x:.3f}"


def format_table(headers: list[str], rows: list[list], title: str) -> str:
    """A plain aligned text table: ``title``, a rule, the header, a rule, the rows, a rule.

    Args:
        headers: column names; the first column is left-aligned, the others right-aligned.
        rows: one list of cells per row (any values; printed with ``str``), each as long
            as ``headers``.
        title: the line printed above the table.

    Returns:
        The table as one string without a trailing newline.
    """
    cells = [headers] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    sep = "-" * (sum(widths) + 2 * (len(widths) - 1))
    return "\n".join([title, sep, line(cells[0]), sep] + [line(r) for r in cells[1:]] + [sep])


def composition_table(manifest: dict) -> str:
    """Rows per config and format (paper Table 4 form)."""
    rows = []
    for config in export_configs(manifest):
        by = manifest["counts"][config]["by_format_condition"]
        per_fmt = [sum(by.get(f, {}).values()) for f in FORMAT_ORDER]
        rows.append([config] + [v or "-" for v in per_fmt] + [manifest["counts"][config]["rows"]])
    return format_table(["config", *FORMAT_ORDER, "total"], rows, "Composition (rows per config and format)")


def gate_table(manifest: dict) -> str:
    """Integrity and shortcut gates per suite (paper Table 6 form)."""
    out = []
    for suite, g in manifest["gate_tables"].items():
        rejected = ", ".join(f"{k} {v}" for k, v in g["rejected"].items()) or "none"
        rows = [
            ["Unique gold target", f"{g['unique_gold']['passed']}/{g['unique_gold']['n']}"],
            ["Structural oracle", _fmt_rate(g["structural_oracle"])],
            ["Visible oracle (prompt + image only)", _fmt_rate(g["visible_oracle"])],
            ["Target-ID leakage", _fmt_rate(g["target_id_leakage"])],
            ["Lexical-only baseline", _fmt_rate(g["lexical_only"])],
            ["Type-only baseline", _fmt_rate(g["type_only"])],
            ["Random-candidate expectation", _fmt_rate(g["random_expectation"])],
        ]
        if suite == "targeted":
            checks = manifest["suite_checks"].get("gold_rank_variation", {})
            ok = all(c["passed"] for c in checks.values())
            rows.append(["Gold-rank variation", "passed" if ok else "FAILED"])
        rows.append(["Accepted latents", f"{g['accepted']}/{g['attempted']} attempts (rejected: {rejected})"])
        rows.append(["Accepted records", f"{g['accepted_records']}"])
        out.append(format_table(["Gate", "Result"], rows, f"Gates: {suite} suite ({g['n']} records)"))
    out.append(suite_check_lines(manifest["suite_checks"]))
    return "\n\n".join(out)


def _passed(result: dict) -> str:
    return "passed" if result["passed"] else "FAILED"


def suite_check_lines(checks: dict) -> str:
    """The suite-level checks of a manifest, one line each (only those the build ran: a
    subset build runs the checks of the configs it holds)."""
    lines = []
    if "disjoint_broad_targeted" in checks:
        lines.append(f"broad/targeted latents disjoint: {_passed(checks['disjoint_broad_targeted'])}")
    if "balance_targeted_table" in checks:
        lines.append(f"targeted_table condition balance: {_passed(checks['balance_targeted_table'])}")
    if "hierarchy_depth_balance" in checks:
        depth = checks["hierarchy_depth_balance"]
        medians = ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in depth["median_candidates"].items())
        lines.append(f"hierarchy depth balance: {_passed(depth)} (median candidates {medians}; "
                     f"max/min {depth['median_ratio']:.3f})")
    for config, result in checks.get("table_shortcuts", {}).items():
        programs = {k: v for k, v in result["all"].items() if k != "random"}
        best = max(programs, key=lambda k: (programs[k], k))
        lines.append(f"table shortcut programs on {config} ({result['n']} cases, expected exact): best {best} "
                     f"{programs[best]:.3f}, random candidate {result['all']['random']:.3f}")
    lines.append("visible oracle per config (rows as released, controls included): " + "; ".join(
        f"{name} {v['exact']}/{v['n']}" for name, v in checks.get("visible_oracle", {}).items()))
    return "Suite checks:\n" + "\n".join(f"  {line}" for line in lines)


Rows = dict[str, list[dict]]
"""``{config: [row dict without the image]}`` as :func:`load_export_rows` returns it."""


def load_export_rows(export_dir: Path, configs=CONFIGS) -> Rows:
    """Every row (image column dropped) of each config, loaded once with ``datasets``.

    Raises:
        FileNotFoundError: ``export_dir`` is not a folder (from
            :func:`predictors.io.load_config_rows`).
    """
    from predictors.io import load_config_rows

    return {config: load_config_rows(export_dir, config) for config in configs}


def _config_rows(export_dir: Path, config: str, rows: Optional[Rows]) -> list[dict]:
    """The rows of one config: from ``rows`` when given (and holding it), else loaded."""
    if rows is not None and config in rows:
        return rows[config]
    return load_export_rows(export_dir, (config,))[config]


def score_outputs(outputs: list, references: list[str]) -> dict:
    """The ExBind metric's result for raw outputs against references, computed the way
    ``evaluate.load("exbind_metric.py").compute(predictions=..., references=...)`` does in
    one process (score each case, aggregate; the metric adds only its version fields).

    Args:
        outputs: raw output strings, one per reference.
        references: the rows' ``reference`` JSON strings.

    Raises:
        ValueError: the two lists differ in length.
    """
    from exbind_aggregate import aggregate
    from exbind_scoring import score_prediction

    if len(outputs) != len(references):
        raise ValueError(f"{len(outputs)} outputs but {len(references)} references; pass one output per reference")
    return aggregate([score_prediction(o, r) for o, r in zip(outputs, references)])


def baseline_tables(export_dir: Path, rows: Optional[Rows] = None, configs=CONFIGS) -> str:
    """Score the gate baselines with the ExBind metric on every config, per format.

    Args:
        export_dir: the export folder.
        rows: preloaded rows (:func:`load_export_rows`); configs missing there are loaded.
        configs: the configs to score (default every release config).
    """
    out = []
    for config in configs:
        data = _config_rows(export_dir, config, rows)
        refs, instrs, formats = ([r[k] for r in data] for k in ("reference", "instruction", "format"))
        results = {name: score_outputs([fn(i, r) for i, r in zip(instrs, refs)], refs)
                   for name, fn in BASELINE_FUNCTIONS.items()}
        fmts = [f for f in FORMAT_ORDER if f in results["structural_oracle"]["by_format"]]
        rows_out = []
        for fmt in fmts + ["all"]:
            idx = [k for k, f in enumerate(formats) if fmt in (f, "all")]
            rnd = sum(random_expectation(refs[k]) for k in idx) / len(idx)
            cells = [fmt, len(idx), _fmt_rate(rnd)]
            for name in BASELINE_FUNCTIONS:
                res = results[name] if fmt == "all" else results[name]["by_format"][fmt]
                cells.append(f"{res['n_exact']}/{res['n']} {_fmt_rate(res['exact_accuracy'])}")
            rows_out.append(cells)
        out.append(format_table(["format", "n", "random", "lexical-only", "type-only", "oracle"], rows_out,
                                 f"Baselines on {config} (exact; gate baselines abstain on ties)"))
    return "\n\n".join(out)


def legacy_bridge_profile(export_dir: Path, manifest: dict, rows: Optional[Rows] = None) -> str:
    """The legacy bridge's eligibility gate and the stage profile of its cached outputs
    (paper §6.5: no-failure vs identity-stage and other first violations, by task type).
    ``rows``: preloaded rows (:func:`load_export_rows`), else the config is loaded."""
    from exbind_aggregate import aggregate
    from exbind_scoring import score_prediction

    data = _config_rows(export_dir, "legacy_bridge", rows)
    cached, references, conditions = ([r[k] for r in data] for k in ("cached_output", "reference", "condition"))
    elig = manifest["legacy_bridge_eligibility"]
    rejected = ", ".join(f"{k} {v}" for k, v in elig["rejected"].items()) or "none"
    selection = elig.get("selection")
    if selection:  # the shipped file: how its tasks were drawn from the gated pool
        pool = ", ".join(f"{k} {v}" for k, v in selection["gate_rejections"].items()) or "none"
        rejected += (f"; drawn from {sum(selection['derived'].values())} derived tasks, "
                     f"{sum(selection['available'].values())} passing, rejected by reason: {pool}")
    table = []
    predictors = sorted({c["predictor"] for c in cached})
    groups = [("all", list(range(len(data))))] + [
        (t, [i for i, c in enumerate(conditions) if c == t]) for t in sorted(set(conditions))]
    records = [score_prediction(c["output"], r) for c, r in zip(cached, references)]
    for name, idx in groups:
        res = aggregate([records[i] for i in idx])
        counts = res["first_violation_counts"]
        other = {k: v for k, v in counts.items() if v and k not in ("none", "identity")}
        table.append([name, res["n"], counts["none"], counts["identity"], sum(other.values()),
                      ", ".join(f"{k} {v}" for k, v in other.items()) or "-"])
    return format_table(["task type", "n", "no failure", "identity-stage", "other", "other first violations"], table,
                        f"Legacy bridge: cached outputs of {', '.join(predictors)} in the stage vocabulary "
                        f"(eligible {elig['eligible']}/{elig['attempted']}; rejected: {rejected})")


PREDICTOR_CONFIGS = ("broad", "targeted_table", "targeted_hierarchy")
REPORT_PREDICTORS = ("random", "lexical_only", "type_only", "structural_oracle", "rank_random", "rank_jaccard",
                     "rank_bm25", "rank_minilm", "rank_rrf")
REFERENCE_RUNS = REPO_ROOT / "runs"


def _profile(result: dict, top: int = 3) -> str:
    """The most frequent first violations other than ``none``, e.g. ``table_column 87, ...``."""
    counts = sorted(((k, v) for k, v in result["first_violation_counts"].items() if v and k != "none"),
                    key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{k} {v}" for k, v in counts[:top]) or "-"


def _predictor_row(name: str, result: dict) -> list:
    ci = result["exact_accuracy_ci"]
    ranking = result.get("ranking") or {}
    rk = lambda key: _fmt_rate(ranking.get(key)) if ranking else "    -"  # noqa: E731
    return [name, result["n"], f"{result['n_valid']}/{result['n']}",
            f"{result['n_exact']}/{result['n']} {_fmt_rate(result['exact_accuracy'])}",
            "n/a" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]",
            rk("recall_at_1"), rk("recall_at_5"), rk("mrr"), _profile(result)]


def reference_run_results(export_dir: Path, config: str, references: dict[str, str]):
    """Scores of the stored model runs under ``runs/`` on ``config``.

    Returns:
        ``(results, refused)``: ``[(run name, aggregate)]`` for runs made on this export's
        records (a partial run is scored on the cases it has and named so), and one message
        per run refused because its records hash differs from the export's.
    """
    from exbind_aggregate import aggregate
    from exbind_scoring import score_prediction
    from predictors.io import read_jsonl
    from predictors.runner import RunExportMismatch, check_run_matches_export

    out, refused = [], []
    for run_dir in sorted(p.parent for p in REFERENCE_RUNS.glob(f"*/{config}/predictions.jsonl")):
        try:
            check_run_matches_export(run_dir, export_dir)
        except RunExportMismatch as exc:
            refused.append(f"refused {run_dir.parent.name}: {exc}")
            continue
        preds = [p for p in read_jsonl(run_dir / "predictions.jsonl") if p["case_id"] in references]
        result = aggregate([score_prediction(p["output"], references[p["case_id"]]) for p in preds])
        done = "" if len(preds) == len(references) else f" (partial: {len(preds)}/{len(references)} cases)"
        out.append((f"{run_dir.parent.name}{done}", result))
    return out, refused


def predictor_tables(export_dir: Path, show_progress: bool = True, rows: Optional[Rows] = None,
                     configs=PREDICTOR_CONFIGS) -> str:
    """Predictors on broad and targeted (issue 4): validity, exact with its Wilson interval,
    R@1 / R@5 / MRR for rankers, the first-violation profile, and any stored model run.
    A progress bar (stderr) names the config and predictor being run (MiniLM takes the most
    on a cold embedding cache). ``rows``: preloaded rows (:func:`load_export_rows`);
    ``configs``: a subset of :data:`PREDICTOR_CONFIGS` (those an export holds)."""
    from predictors import predict

    out = []
    bar = tqdm(total=len(configs) * len(REPORT_PREDICTORS), desc="predictors report", unit="run",
               disable=not show_progress)
    try:
        for config in configs:
            data = _config_rows(export_dir, config, rows)
            refs = [r["reference"] for r in data]
            table = []
            for name in REPORT_PREDICTORS:
                bar.set_postfix_str(f"{config} {name}")
                outputs = [p["output"] for p in predict(data, name)]
                table.append(_predictor_row(name, score_outputs(outputs, refs)))
                bar.update(1)
            runs, refused = reference_run_results(export_dir, config, {r["case_id"]: r["reference"] for r in data})
            table += [_predictor_row(name, result) for name, result in runs]
            out.append(format_table(
                ["predictor", "n", "valid", "exact", "exact 95% CI", "R@1", "R@5", "MRR", "first violations"], table,
                f"Predictors on {config}") + "".join(f"\n{msg}" for msg in refused))
    finally:  # closed before anything else is printed, an interrupt's line included
        bar.close()
    out.append("random picks one candidate (graph: one ordered pair) per case with a seeded generator; "
               "lexical_only, type_only and structural_oracle abstain on ties as the gates do; rankers (rank_*) break ties by sha256(case id, ranker, candidate id), so their top-1 differs "
               "by design. rank_rrf fuses rank_bm25 and rank_minilm (k=60).")
    return "\n\n".join(out)


def print_release_report(export_dir: Path, manifest: dict | None = None, scored: bool = True) -> None:
    """Print the composition and gate tables of an export folder and, when ``scored``, the
    baseline, legacy-bridge and predictor tables (the configs its manifest lists: every
    section of a subset build covers what it built)."""
    if manifest is None:
        manifest = json.loads((Path(export_dir) / "exbind_manifest.json").read_text())
    configs = export_configs(manifest)
    print(composition_table(manifest))
    print()
    print(gate_table(manifest))
    if not scored:
        return
    print()
    rows = load_export_rows(Path(export_dir), configs)
    print(baseline_tables(Path(export_dir), rows, configs))
    if "legacy_bridge" in configs:
        print()
        print(legacy_bridge_profile(Path(export_dir), manifest, rows))
    predictor_configs = tuple(c for c in PREDICTOR_CONFIGS if c in configs)
    if predictor_configs:
        print()
        print(predictor_tables(Path(export_dir), rows=rows, configs=predictor_configs))
