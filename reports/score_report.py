"""Score a predictions file against one ExBind config and print the paper-style report.

Command line (``python exbind.py score --help``)::

    python exbind.py score --config targeted_table --predictions preds.jsonl \\
        [--export ./exbind] [--per-case scores.jsonl] [--json report.json] \\
        [--compare-config targeted_table_permuted --compare preds_perm.jsonl] [--allow-unknown] \\
        [--eval-results MODEL_REPO_DIR --eval-dataset-id USER/exbind [--eval-dataset-revision SHA]]

Also ``--inspect-log LOG`` (the completions of an inspect-ai log of the ``exbind`` task),
``--run DIR`` and ``--compare-runs DIR_A DIR_B`` (:mod:`reports.run_reports`).

Predictions file: JSON Lines, one object per line, ``{"case_id": "...", "output": "<raw
model output text>"}`` (other keys are ignored; blank lines are skipped). ``output`` is the
raw text exactly as the model produced it; the scorer parses it (docs/specification.md §4 step 1).

Scoring goes through the functions the ``evaluate`` metric calls
(:func:`exbind_scoring.score_prediction` per case, :func:`exbind_aggregate.aggregate` and
:func:`exbind_aggregate.paired_comparison` over cases); this module only reads files,
accounts for every case id and prints tables. Nothing is dropped silently:

- a config case without a prediction is scored ``unresolved`` with reason
  ``"no prediction"`` (the denominator keeps it) and counted in the report header;
- a case id that is not in the config is an error listing the ids (exit status 2), unless
  ``--allow-unknown``, which ignores them and lists them in the header;
- a case id given twice, a line that is not a JSON object, or a line without a string
  ``case_id`` / ``output`` is an error naming the line(s) (exit status 2);
- lines carrying ``config`` / ``records_hash`` made on another config or build are refused
  (exit status 2; :func:`check_file_identity`); an empty file is exit status 2 unless
  ``--allow-missing``; a partial file is reported in the header.

Printed tables (paper numbering): validity and exact accuracy with Wilson 95% intervals
(Table 7), valid/exact per representation (Table 8), applicability (Table 14),
opportunity-normalized first violations (Table 15), survival S(k) per family,
cross-format consistency and first-violation transitions (Tables 10 and 13); with
``--compare`` the paired comparison (Tables 9 and 12): original = ``--predictions`` on
``--config``, variant = ``--compare`` on ``--compare-config`` (default: the same config),
matched by parent case id (``targeted_table_permuted``: ``parent_case_id``;
``targeted_table_column_metadata``: the same case ids).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import datasets

from exbind_aggregate import aggregate, group_variants, paired_comparison, wilson_interval
from exbind_scoring import CANONICAL_DIMENSION, CANONICAL_DIMENSIONS, REFERENCE_SCHEMA, score_prediction
from publishing.export import not_an_export
from publishing.prediction_identity import (IDENTITY_FIELDS, PredictionIdentityError, check_prediction_identity,
                                           records_hash)
from predictors.io import per_case_row
from reports.report import FORMAT_ORDER, format_table

NO_PREDICTION = "no prediction"
BOOTSTRAP_RESAMPLES = 10000
BOOTSTRAP_SEED = 20260824
_SHOW_IDS = 10  # ids listed in a message before "... and N more"


class ScoreInputError(ValueError):
    """A predictions file, export folder or config that cannot be scored; the message says why."""


# --------------------------------------------------------------------------- inputs


def _list_ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:_SHOW_IDS])
    return shown + (f", ... and {len(ids) - _SHOW_IDS} more" if len(ids) > _SHOW_IDS else "")


def read_predictions(path: Path, option: str = "--predictions") -> dict[str, str]:
    """Read a predictions JSONL file.

    Args:
        path: one JSON object per line with a string ``case_id`` and a string ``output``
            (the raw model output); blank lines are skipped, other keys ignored.
        option: the command-line option that named ``path`` (``--compare``), for the message
            when it is a directory.

    Returns:
        ``{case_id: output}`` in file order.

    Raises:
        ScoreInputError: the file is missing or a directory; a line is not valid UTF-8, is not a
            JSON object or lacks a string ``case_id`` / ``output`` (a ``case_id`` of another type
            or an empty one is named as such; the message names the line number); or case ids repeat
            (the message lists every repeated id with its line numbers).
    """
    path = Path(path)
    if path.is_dir():
        raise ScoreInputError(f"{option} {path} is a directory; pass a JSONL file")
    if path.exists() and not path.is_file():
        raise ScoreInputError(f"{option} {path} is not a regular file (a pipe, device or socket); "
                              "save the predictions to a JSONL file and pass its path")
    if not path.is_file():
        raise ScoreInputError(f"{path}: predictions file not found")
    out: dict[str, str] = {}
    lines: dict[str, list[int]] = {}
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ScoreInputError(
                    f"{path}:{number}: not valid UTF-8 (byte {raw[exc.start:exc.start + 1]!r} at column "
                    f"{exc.start + 1}); write predictions files as UTF-8") from None
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise ScoreInputError(f"{path}:{number}: not a JSON object ({exc})") from None
            if not isinstance(obj, dict):
                raise ScoreInputError(f"{path}:{number}: expected a JSON object, got {type(obj).__name__}")
            case_id = obj.get("case_id")
            if case_id is None:
                raise ScoreInputError(f"{path}:{number}: missing string field `case_id`")
            if not isinstance(case_id, str):
                raise ScoreInputError(
                    f"{path}:{number}: field `case_id` must be a string, got {type(case_id).__name__}")
            if not case_id:
                raise ScoreInputError(f"{path}:{number}: field `case_id` is empty; give the released case id")
            if "output" not in obj:
                raise ScoreInputError(f"{path}:{number}: case {case_id!r} has no `output` field (the raw model output)")
            if not isinstance(obj["output"], str):
                raise ScoreInputError(
                    f"{path}:{number}: case {case_id!r}: `output` must be the raw model output as a string, "
                    f"got {type(obj['output']).__name__} (write json.dumps(value) for a parsed reference)"
                )
            lines.setdefault(case_id, []).append(number)
            out.setdefault(case_id, obj["output"])
    repeated = {cid: nums for cid, nums in lines.items() if len(nums) > 1}
    if repeated:
        shown = list(repeated.items())[:_SHOW_IDS]
        listed = "; ".join(f"{cid} (lines {', '.join(map(str, nums))})" for cid, nums in shown)
        more = f"; ... and {len(repeated) - _SHOW_IDS} more" if len(repeated) > _SHOW_IDS else ""
        raise ScoreInputError(f"{path}: {len(repeated)} duplicate case id(s): {listed}{more}")
    return out


def check_file_identity(path: Path, config: str, export_dir: Path, config_option: str = "--config") -> dict:
    """Refuse a predictions file made on another config or another build (issue 10 item 5).

    Lines carrying ``config`` / ``records_hash`` must name ``config`` and the export's
    ``canonical_records_sha256[config]``; lines without them (the older format) pass.
    ``config_option`` is the option the suggested fix names (``--compare-config`` for the
    second file of a comparison).

    Returns:
        :func:`publishing.prediction_identity.check_prediction_identity`'s counts.

    Raises:
        ScoreInputError: a mismatch (the message names the case, both values and the fix).
    """
    lines = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                obj = json.loads(line)
                lines.append({k: obj.get(k) for k in ("case_id", *IDENTITY_FIELDS)})
    try:
        return check_prediction_identity(lines, config, records_hash(export_dir, config), str(path), config_option)
    except PredictionIdentityError as exc:
        raise ScoreInputError(str(exc)) from None


def load_config(export_dir: Path, config: str, cache_dir: Optional[str] = None) -> tuple[list[str], list[str]]:
    """Case ids and ``reference`` strings of one config of an export folder.

    Reads ``datasets.load_dataset(export_dir, config, split="test")`` without the image
    column.

    Args:
        export_dir: a folder written by ``python exbind.py build``.
        config: a config name of that export (e.g. ``"targeted_table"``).
        cache_dir: ``datasets`` cache folder (default: the ``datasets`` default).

    Returns:
        ``(case_ids, references)`` in row order.

    Raises:
        ScoreInputError: when the folder is not an export or has no such config.
    """
    export_dir = Path(export_dir)
    problem = not_an_export(export_dir)
    if problem:
        raise ScoreInputError(problem)
    was_disabled = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        ds = datasets.load_dataset(str(export_dir), config, split="test", cache_dir=cache_dir)
    except ValueError as exc:
        raise ScoreInputError(f"{export_dir}: cannot load config {config!r}: {exc}") from None
    finally:
        if not was_disabled:
            datasets.enable_progress_bars()
    if "image" in ds.column_names:
        ds = ds.remove_columns(["image"])
    return list(ds["case_id"]), list(ds["reference"])


def score_cases(case_ids: list[str], references: list[str], predictions: dict[str, str],
                allow_unknown: bool = False, config: str = "the config",
                coordinate_frame: Optional[str] = None) -> dict:
    """Score every case of a config, accounting for every case id.

    Args:
        case_ids, references: the config's rows (:func:`load_config`).
        predictions: ``{case_id: raw output}`` (:func:`read_predictions`).
        allow_unknown: ignore prediction case ids that are not in the config (they are
            still listed in the result) instead of raising.
        config: the config name, for messages.
        coordinate_frame: frame of click predictions (``"pixel"``, ``"unit"``,
            ``"thousand"``); clicks without one are invalid (docs/specification.md §9).

    Returns:
        ``{"records": [...], "missing": [...], "unknown": [...]}``: one per-case record
        (:func:`exbind_scoring.score_prediction` plus ``gold`` and the raw ``output``,
        :func:`predictors.io.per_case_row`) per config row in row order; a row
        without a prediction is scored as the empty output (``unresolved``) and its
        ``reason`` is ``"no prediction"``; ``missing`` and ``unknown`` list case ids.

    Raises:
        ScoreInputError: when a prediction names a case id that is not in the config and
            ``allow_unknown`` is False (the message lists the ids).
    """
    known = set(case_ids)
    unknown = [cid for cid in predictions if cid not in known]
    if unknown and not allow_unknown:
        raise ScoreInputError(
            f"{len(unknown)} predicted case id(s) are not in config {config!r}: {_list_ids(unknown)} "
            "(wrong --config? pass --allow-unknown to ignore them)"
        )
    records, missing = [], []
    for case_id, reference in zip(case_ids, references):
        if case_id in predictions:
            output = predictions[case_id]
            records.append(per_case_row(score_prediction(output, reference, coordinate_frame=coordinate_frame),
                                        output, reference))
        else:
            record = per_case_row(score_prediction("", reference), "", reference)
            record["reason"] = NO_PREDICTION
            records.append(record)
            missing.append(case_id)
    return {"records": records, "missing": missing, "unknown": unknown}


# --------------------------------------------------------------------------- summaries


def summarize(records: list[dict]) -> dict:
    """:func:`exbind_aggregate.aggregate` plus what the printed tables add.

    Returns:
        The aggregate dict plus ``validity_ci`` (Wilson 95% for validity; None when n = 0),
        ``applicability_formats`` ({canonical dimension: sorted formats where it is scored},
        paper Table 14), ``reference_schema`` and ``generator_version`` (the one version the
        records name, a sorted list when they disagree, None when none).
    """
    out = aggregate(records)
    out["validity_ci"] = wilson_interval(out["n_valid"], out["n"])
    formats: dict[str, set] = {d: set() for d in CANONICAL_DIMENSIONS}
    for r in records:
        for stage in r["scores"]:
            formats[CANONICAL_DIMENSION[stage]].add(r["format"])
    order = {f: i for i, f in enumerate(FORMAT_ORDER)}
    out["applicability_formats"] = {d: sorted(f, key=lambda x: order.get(x, len(order))) for d, f in formats.items()}
    out["reference_schema"] = REFERENCE_SCHEMA
    versions = sorted({r["generator_version"] for r in records if r.get("generator_version")})
    out["generator_version"] = versions[0] if len(versions) == 1 else (versions or None)
    return out


def _paired_section(original: list[dict], variant: list[dict], resamples: int, seed: int) -> dict:
    comparison = paired_comparison(original, variant, resamples=resamples, seed=seed)
    by_index: dict[int, list[dict]] = {}
    for rows in group_variants(variant).values():
        for k, record in rows:
            by_index.setdefault(k, []).append(record)
    permuted = any("__perm" in r["case_id"] for r in variant)
    return {
        **comparison,
        "permuted": permuted,
        "original_summary": summarize(original),
        "variant_summaries": {str(k): summarize(by_index[k]) for k in sorted(by_index)},
    }


def build_report(config: str, export_dir: Path, predictions_path: Path, *, compare_config: Optional[str] = None,
                 compare_path: Optional[Path] = None, allow_unknown: bool = False, cache_dir: Optional[str] = None,
                 resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                 coordinate_frame: Optional[str] = None, allow_missing: bool = False) -> dict:
    """Score one predictions file (and optionally a second one for the paired comparison).

    Args:
        config: config of ``predictions_path``.
        export_dir: export folder (:func:`load_config`).
        predictions_path: predictions JSONL (:func:`read_predictions`).
        compare_config: config of ``compare_path`` (default ``config``).
        compare_path: second predictions JSONL; enables the paired comparison.
        allow_unknown: see :func:`score_cases`.
        cache_dir: ``datasets`` cache folder.
        resamples, seed: paired bootstrap settings (:func:`exbind_aggregate.paired_comparison`).
        coordinate_frame: frame of click predictions (:func:`score_cases`).
        allow_missing: accept an empty predictions file (every case scored unresolved).

    Returns:
        Plain JSON: ``config``, ``export``, ``predictions`` (path), ``n_rows``,
        ``n_predictions`` (lines read), ``missing``, ``unknown`` (case id lists),
        ``summary`` (:func:`summarize`), ``records`` (per-case records, row order); with a
        comparison also ``compare`` (the same keys for the second file, without
        ``compare``) and ``paired`` (:func:`exbind_aggregate.paired_comparison` plus
        ``permuted``, ``original_summary`` and ``variant_summaries`` per variant index).

    Raises:
        ScoreInputError: see :func:`read_predictions`, :func:`load_config`,
            :func:`score_cases`, :func:`check_file_identity`; an empty file without
            ``allow_missing``.
    """
    def one(cfg: str, path: Path, option: str) -> dict:
        predictions = read_predictions(path, option)
        if not predictions and not allow_missing:
            raise ScoreInputError(f"{path}: empty predictions file (no case id); nothing was predicted "
                                  "(pass --allow-missing to score every case as unresolved)")
        check_file_identity(path, cfg, export_dir, "--compare-config" if option == "--compare" else "--config")
        case_ids, references = load_config(export_dir, cfg, cache_dir)
        scored = score_cases(case_ids, references, predictions, allow_unknown, cfg, coordinate_frame)
        return {
            "config": cfg,
            "export": str(Path(export_dir).resolve()),
            "predictions": str(path),
            "n_rows": len(case_ids),
            "n_predictions": len(predictions),
            "missing": scored["missing"],
            "unknown": scored["unknown"],
            "summary": summarize(scored["records"]),
            "records": scored["records"],
        }

    report = one(config, predictions_path, "--predictions")
    if compare_path is not None:
        report["compare"] = one(compare_config or config, compare_path, "--compare")
        report["paired"] = _paired_section(report["records"], report["compare"]["records"], resamples, seed)
    return report


# --------------------------------------------------------------------------- tables


def _rate(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _ci(ci) -> str:
    return "n/a" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _count_pct(k: int, n: int) -> str:
    return f"{k}/{n} (" + ("n/a" if not n else f"{100 * k / n:.1f}") + ")"


def header_text(part: dict) -> str:
    """Header lines: config, rows, predictions read, missing and unknown case ids, versions."""
    s = part["summary"]
    lines = [
        f"ExBind score: config {part['config']} ({part['n_rows']} rows) from {part['export']}",
        f"predictions: {part['predictions']} ({part['n_predictions']} case ids); scored {part['n_rows']} rows; "
        f"missing {len(part['missing'])}; unknown {len(part['unknown'])}",
    ]
    if part["missing"]:
        if part["n_predictions"]:
            lines.append(f"partial predictions file: {part['n_rows'] - len(part['missing'])} of {part['n_rows']} "
                         "cases predicted")
        lines.append(f"missing: {len(part['missing'])} case(s) without a prediction, scored unresolved "
                     f"({NO_PREDICTION!r}): {_list_ids(part['missing'])}")
    if part["unknown"]:
        lines.append(f"unknown: {len(part['unknown'])} case id(s) not in {part['config']}, ignored "
                     f"(--allow-unknown): {_list_ids(part['unknown'])}")
    lines.append(f"generator {s['generator_version']}; reference schema {s['reference_schema']}")
    return "\n".join(lines)


def validity_exact_table(summary: dict) -> str:
    """Validity and exact accuracy with Wilson 95% intervals, overall and per condition (Table 7)."""
    rows = [("all", summary, summary["validity_ci"])]
    for cond, h in summary["by_condition"].items():
        rows.append((cond, h, wilson_interval(h["n_valid"], h["n"])))
    body = [[label, h["n"], f"{h['n_valid']}/{h['n']}", _rate(h["validity"]), _ci(vci), f"{h['n_exact']}/{h['n']}",
             _rate(h["exact_accuracy"]), _ci(h["exact_accuracy_ci"]), h["n_valid"] - h["n_exact"]]
            for label, h, vci in rows]
    return format_table(["set", "cases", "valid", "validity", "valid 95% CI", "exact", "exact acc",
                         "exact 95% CI", "errors after validity"], body,
                        "Validity and exact accuracy (Table 7 form; Wilson 95% intervals)")


def representation_table(summary: dict) -> str:
    """Valid and exact counts with percentages per representation (Table 8)."""
    fmts = sorted(summary["by_format"], key=lambda f: FORMAT_ORDER.index(f) if f in FORMAT_ORDER else len(FORMAT_ORDER))
    rows = [[f, h["n"], _count_pct(h["n_valid"], h["n"]), _count_pct(h["n_exact"], h["n"])]
            for f, h in ((f, summary["by_format"][f]) for f in fmts)]
    rows.append(["all", summary["n"], _count_pct(summary["n_valid"], summary["n"]),
                 _count_pct(summary["n_exact"], summary["n"])])
    return format_table(["representation", "N", "valid", "exact"], rows,
                        "By representation (Table 8 form; valid/exact (percent))")


def applicability_table(summary: dict) -> str:
    """Cases on which each canonical dimension is scored (Table 14).

    A dimension scored on no case is marked not applicable (fraction ``n/a``, never 0)."""
    n = summary["n"]
    rows = []
    for dim in CANONICAL_DIMENSIONS:
        k = summary["applicability"][dim]
        if k:
            rows.append([dim, k, _rate(k / n), ", ".join(summary["applicability_formats"][dim])])
        else:
            rows.append([dim, 0, "n/a", "not applicable"])
    return format_table(["dimension", "applicable", "fraction", "representations"], rows,
                        "Applicability (Table 14 form)")


def first_violation_table(summary: dict) -> str:
    """First-violation counts over their opportunity denominators (Table 15).

    Lists every label with at least one opportunity (``none``: every case)."""
    rows = [[label, v["opportunities"], f"{v['count']} ({_rate(v['rate'])})"]
            for label, v in summary["first_violation_profile"].items() if v["opportunities"]]
    return format_table(["first violation", "opportunities", "count (rate)"], rows,
                        "Opportunity-normalized first violations (Table 15 form)")


def survival_table(summary: dict) -> str:
    """S(k) per family along its declared order."""
    rows = [[family, p["stage"], f"{p['surviving']}/{p['n']}", _rate(p["rate"])]
            for family, curve in summary["survival"].items() for p in curve]
    return format_table(["family", "stage", "surviving", "S(k)"], rows, "Survival along the declared order")


def consistency_tables(summary: dict, config: str) -> str:
    """Cross-format semantic consistency (Table 10) and first-violation transitions (Table 13)."""
    cons = summary["cross_format_consistency"]
    if not cons:
        return f"Cross-format consistency (Tables 10 and 13 form): no cross-format groups in {config}"
    rows = [[pair, c["groups"], c["consistent"], _rate(c["rate"]), c["incomplete_groups"]] for pair, c in cons.items()]
    first = format_table(["pair", "groups", "consistent", "rate", "incomplete groups"], rows,
                         "Cross-format semantic consistency (Table 10 form)")
    trows = [[pair, t, k] for pair, c in cons.items() for t, k in c["transitions"].items()]
    second = format_table(["pair", "transition (first violation a->b)", "groups"], trows,
                          "Paired first-violation transitions (Table 13 form; svg->canvas, tree->dom)")
    return first + "\n\n" + second


def _error_profile(summary: dict) -> str:
    errors = summary["n"] - summary["n_exact"]
    if not errors:
        return "no errors"
    counts = [f"{label} {k}" for label, k in summary["first_violation_counts"].items() if k and label != "none"]
    return f"{errors} errors: " + ", ".join(counts)


def paired_table(report: dict) -> str:
    """Original vs variant rows and the paired delta (Tables 9 and 12)."""
    paired = report["paired"]
    comp = report["compare"]["config"]
    rows = []

    def add(label: str, s: dict) -> None:
        rows.append([label, s["n"], _rate(s["validity"]), f"{s['n_exact']}/{s['n']}", _ci(s["exact_accuracy_ci"]),
                     _error_profile(s)])

    add(f"original ({report['config']})", paired["original_summary"])
    for k, s in paired["variant_summaries"].items():
        add(f"permutation {k} ({comp})" if paired["permuted"] else f"variant {k} ({comp})", s)
    delta = "n/a" if paired["delta"] is None else f"{paired['delta']:+.3f}"
    note = (f"{paired['improved']} improve, {paired['regressed']} regress, {paired['order_sensitive']} sensitive; "
            f"bootstrap over parents, {paired['resamples']} resamples, seed {paired['seed']}")
    rows.append(["paired delta", paired["parents"], "-", delta, _ci(paired["ci"]), note])
    title = ("Candidate-order control (Table 12 form)" if paired["permuted"]
             else "Paired comparison (Table 9 form)")
    out = format_table(["condition", "cases", "validity", "exact", "exact 95% CI / delta CI", "notes"], rows,
                       title + "; exact intervals Wilson 95%, delta interval paired percentile bootstrap")
    unpaired = []
    if paired["unpaired_original"]:
        unpaired.append(f"{len(paired['unpaired_original'])} original case(s) without a variant: "
                        f"{_list_ids(paired['unpaired_original'])}")
    if paired["unpaired_variant"]:
        unpaired.append(f"{len(paired['unpaired_variant'])} variant parent(s) without an original: "
                        f"{_list_ids(paired['unpaired_variant'])}")
    return out + ("\n" + "\n".join("unpaired: " + u for u in unpaired) if unpaired else "")


def ranking_click_tables(summary: dict) -> list[str]:
    """R@k / MRR of ranked predictions and point-in-box accuracy of clicks (docs/specification.md §9), when present."""
    out = []
    ranking = summary.get("ranking")
    if ranking:
        out.append(format_table(
            ["ranked cases", "R@1", "R@5", "R@10", "MRR"],
            [[ranking["n_ranked"], _rate(ranking["recall_at_1"]), _rate(ranking["recall_at_5"]),
              _rate(ranking["recall_at_10"]), _rate(ranking["mrr"])]],
            "Ranked predictions (top-1 scored as the reference; repeats count at their first position)"))
    click = summary.get("click")
    if click:
        classes = ", ".join(f"{k} {v}" for k, v in click["classes"].items())
        out.append(format_table(
            ["clicks", "point-in-box", "95% CI", "loose (2x diagonal)", "95% CI", "classes"],
            [[click["n_clicks"], _rate(click["point_in_box_accuracy"]), _ci(click["point_in_box_accuracy_ci"]),
              _rate(click["loose_accuracy"]), _ci(click["loose_accuracy_ci"]), classes]],
            "Click predictions (resolved to the smallest containing candidate box)"))
    return out


def format_report(report: dict) -> str:
    """The whole printed report of :func:`build_report` as one string."""
    s = report["summary"]
    parts = [
        header_text(report),
        validity_exact_table(s),
        representation_table(s),
        applicability_table(s),
        first_violation_table(s),
        survival_table(s),
        consistency_tables(s, report["config"]),
        *ranking_click_tables(s),
    ]
    if "paired" in report:
        parts.append("Comparison file\n" + header_text(report["compare"]))
        parts.append(paired_table(report))
    return "\n\n".join(parts)


def write_plots(report: dict, export_dir: Path, out_dir: Path, cache_dir: Optional[str] = None) -> list[Path]:
    """Write the figures of a :func:`build_report` result (``--plots DIR``).

    The gold ranks come from the config's ``reference`` column (:func:`load_config`); with a
    comparison the paired figure is added. See :func:`reports.plots.save_all`.

    Returns:
        The written PNG paths.
    """
    from reports.plots import save_all  # matplotlib is needed only for --plots

    _, references = load_config(export_dir, report["config"], cache_dir)
    return save_all(report["summary"], report["records"], references, out_dir, paired=report.get("paired"))
