"""Aggregates over scored ExBind cases (SPEC §5, §11; paper §5-6, A.6-A.9).

Input is a list of per-case records from :func:`exbind_scoring.score_prediction`; output
is plain JSON-serializable Python (ints, floats, strings, lists, dicts, None). An undefined
rate is None, never NaN, and n = 0 never raises.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
from scipy.stats import binomtest, bootstrap

try:  # inside evaluate's module cache this file sits in a package beside exbind_scoring
    from .exbind_scoring import (CANONICAL_DIMENSION, CANONICAL_DIMENSIONS, CLICK_CLASSES, DECLARED_ORDERS,
                                 FIRST_VIOLATION_LABELS, PREDICTION_KINDS, RANKING_CUTOFFS)
except ImportError:  # imported from the repository root
    from exbind_scoring import (CANONICAL_DIMENSION, CANONICAL_DIMENSIONS, CLICK_CLASSES, DECLARED_ORDERS,
                                FIRST_VIOLATION_LABELS, PREDICTION_KINDS, RANKING_CUTOFFS)

# Cross-format pair types and their transition direction (SPEC §11: svg -> canvas, tree -> dom).
PAIR_TYPES = {"svg-canvas": ("svg", "canvas"), "tree-dom": ("tree", "dom")}


def rate(k: int, n: int):
    """``k / n`` as a float, or None when ``n == 0``."""
    return k / n if n else None


def wilson_interval(k: int, n: int, confidence: float = 0.95):
    """Wilson score interval for a binomial proportion (paper A.6).

    Args:
        k: successes, ``0 <= k <= n``.
        n: trials.
        confidence: two-sided level in (0, 1).

    Returns:
        ``[low, high]`` floats in [0, 1] (e.g. 191/250 -> [0.708, 0.812] to three
        decimals, 0/50 -> [0.000, 0.071]), or None when ``n == 0``.

    Raises:
        ValueError: when ``k`` is outside ``[0, n]``.
    """
    if n == 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"k={k} must lie in [0, n={n}]")
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return [float(max(0.0, ci.low)), float(min(1.0, ci.high))]


def proportion(k: int, n: int) -> dict:
    """``{"k", "n", "rate", "ci"}`` with the Wilson interval."""
    return {"k": k, "n": n, "rate": rate(k, n), "ci": wilson_interval(k, n)}


def _headline(records: list[dict]) -> dict:
    n = len(records)
    n_valid = sum(r["status"] == "valid" for r in records)
    n_exact = sum(r["scores"]["exact"] for r in records)
    return {
        "n": n,
        "n_valid": n_valid,
        "validity": rate(n_valid, n),
        "n_exact": n_exact,
        "exact_accuracy": rate(n_exact, n),
        "exact_accuracy_ci": wilson_interval(n_exact, n),
    }


def _breakdown(records: list[dict], field: str) -> dict:
    groups: dict[str, list[dict]] = {}
    for r in records:
        if r.get(field) is not None:
            groups.setdefault(r[field], []).append(r)
    return {key: _headline(groups[key]) for key in sorted(groups)}


def _stage_accuracy(records: list[dict]) -> dict:
    correct: Counter = Counter()
    applicable: Counter = Counter()
    for r in records:
        for stage, score in r["scores"].items():
            applicable[stage] += 1
            correct[stage] += score
    return {s: {"correct": correct[s], "applicable": applicable[s], "accuracy": rate(correct[s], applicable[s])}
            for s in sorted(applicable)}


def _dimension_accuracy(records: list[dict]) -> dict:
    correct = {d: 0 for d in CANONICAL_DIMENSIONS}
    applicable = {d: 0 for d in CANONICAL_DIMENSIONS}
    for r in records:
        for stage, score in r["scores"].items():
            dim = CANONICAL_DIMENSION[stage]
            applicable[dim] += 1
            correct[dim] += score
    return {d: {"correct": correct[d], "applicable": applicable[d], "accuracy": rate(correct[d], applicable[d])}
            for d in CANONICAL_DIMENSIONS}


def _first_violation_profile(records: list[dict]) -> dict:
    """Opportunity-normalized first violations (paper Table 15)."""
    counts = Counter(r["first_violation"] for r in records)
    opportunities: Counter = Counter()
    for r in records:
        for stage in r["scores"]:
            opportunities[stage] += 1
    n = len(records)
    out = {}
    for label in FIRST_VIOLATION_LABELS:
        opp = n if label == "none" else opportunities[label]
        out[label] = {"count": counts[label], "opportunities": opp, "rate": rate(counts[label], opp)}
    return out


def _survival(records: list[dict]) -> dict:
    """S(k) per family along its declared order; a stage that does not apply counts as passed."""
    out = {}
    for family, order in DECLARED_ORDERS.items():
        fam = [r for r in records if r["family"] == family]
        if not fam:
            continue
        curve = []
        alive = fam
        for stage in order:
            alive = [r for r in alive if r["scores"].get(stage, 1) == 1]
            curve.append({"stage": stage, "surviving": len(alive), "n": len(fam), "rate": rate(len(alive), len(fam))})
        out[family] = curve
    return out


def _latent_answer(record: dict):
    latent = record.get("predicted_latent")
    if record["status"] != "valid" or not latent:
        return None
    if "entity" in latent:
        return latent["entity"]
    return (latent.get("source"), latent.get("target"))


def cross_format_consistency(records: list[dict]) -> dict:
    """Semantic consistency and first-violation transitions per pair type (paper §6.5, A.8).

    A group (shared ``group_id``) is complete when both surfaces of its pair type are
    present; it is consistent when both predictions are valid and map to the same latent
    answer (surface ids need not match). Transitions are keyed
    ``"<first violation a>-><first violation b>"`` in the direction svg->canvas, tree->dom.

    Returns:
        ``{pair: {"groups", "consistent", "rate", "incomplete_groups", "transitions"}}``
        for each pair type that has at least one grouped record.
    """
    by_group: dict[str, dict[str, dict]] = {}
    for r in records:
        if r.get("group_id"):
            by_group.setdefault(r["group_id"], {})[r["format"]] = r
    out = {}
    for pair, (fa, fb) in PAIR_TYPES.items():
        members = {g: m for g, m in by_group.items() if fa in m or fb in m}
        if not members:
            continue
        complete = [m for m in members.values() if fa in m and fb in m]
        consistent = 0
        transitions: Counter = Counter()
        for m in complete:
            a, b = _latent_answer(m[fa]), _latent_answer(m[fb])
            consistent += int(a is not None and a == b)
            transitions[f"{m[fa]['first_violation']}->{m[fb]['first_violation']}"] += 1
        out[pair] = {
            "groups": len(complete),
            "consistent": consistent,
            "rate": rate(consistent, len(complete)),
            "incomplete_groups": len(members) - len(complete),
            "transitions": dict(sorted(transitions.items())),
        }
    return out


def ranking_summary(records: list[dict]):
    """R@1, R@5, R@10 and MRR over the ranked cases (SPEC §9; lexical-coupling paper §3).

    Only records with ``kind == "ranking"`` count (:func:`exbind_scoring.score_ranking`); a
    ranked case whose ``rank_of_gold`` is None (gold absent, ranking invalid or unresolved)
    is a miss at every cutoff and adds 0 to the reciprocal-rank sum, so every ranked case
    stays in the denominator.

    Returns:
        None when no record is a ranking; else ``{"n_ranked", "n_hits_at_1",
        "recall_at_1", "n_hits_at_5", "recall_at_5", "n_hits_at_10", "recall_at_10",
        "mrr"}``: counts (ints) and rates (floats in [0, 1]); ``recall_at_k`` = cases with
        ``rank_of_gold <= k`` / ``n_ranked``; ``mrr`` = mean of ``1 / rank_of_gold``
        (0 for a miss). Example: ranks [1, 2, None, 7] -> R@1 0.25, R@5 0.5, R@10 0.75,
        MRR (1 + 1/2 + 0 + 1/7) / 4 = 0.411.
    """
    ranks = [r.get("rank_of_gold") for r in records if r.get("kind") == "ranking"]
    if not ranks:
        return None
    n = len(ranks)
    out: dict = {"n_ranked": n}
    for k in RANKING_CUTOFFS:
        hits = sum(1 for rank in ranks if rank is not None and rank <= k)
        out[f"n_hits_at_{k}"] = hits
        out[f"recall_at_{k}"] = hits / n
    out["mrr"] = sum(1.0 / rank for rank in ranks if rank) / n
    return out


def click_summary(records: list[dict]):
    """Point-in-box and loose accuracy and the click classes (SPEC §9; GUI-Primitives).

    Only records with ``kind == "click"`` count (:func:`exbind_scoring.score_click`); every
    click, invalid ones included, is in the denominators.

    Returns:
        None when no record is a click; else ``{"n_outside_frame", "frame_warning",
        "n_clicks", "n_in_box", "point_in_box_accuracy", "point_in_box_accuracy_ci",
        "n_loose", "loose_accuracy", "loose_accuracy_ci", "classes"}``: ``n_outside_frame``
        counts clicks read but outside their frame, and ``frame_warning``
        (:func:`click_frame_warning`) is a sentence when most clicks are, else None; accuracy = clicks inside the gold candidate's box
        (``loose``: within twice the gold box's diagonal of its centre) / ``n_clicks``,
        with Wilson 95% intervals ``[low, high]``; ``classes`` counts ``target``,
        ``distractor``, ``neither`` and ``invalid`` (they sum to ``n_clicks``).
    """
    clicks = [r["click"] for r in records if r.get("kind") == "click"]
    if not clicks:
        return None
    n = len(clicks)
    in_box = sum(1 for c in clicks if c["in_gold_box"])
    loose = sum(1 for c in clicks if c["loose_hit"])
    outside = sum(1 for c in clicks if c.get("outside_frame"))
    classes = Counter(c["class"] for c in clicks)
    return {
        "n_outside_frame": outside,
        "frame_warning": click_frame_warning(outside, n),
        "n_clicks": n,
        "n_in_box": in_box,
        "point_in_box_accuracy": rate(in_box, n),
        "point_in_box_accuracy_ci": wilson_interval(in_box, n),
        "n_loose": loose,
        "loose_accuracy": rate(loose, n),
        "loose_accuracy_ci": wilson_interval(loose, n),
        "classes": {label: classes[label] for label in CLICK_CLASSES},
    }


def click_frame_warning(n_outside: int, n_clicks: int):
    """The warning for a run whose clicks mostly lie outside their frame (issue 11 item 9).

    Clicks given in thousandths but scored as pixels (or pixels scored as ``unit``) fall
    outside the image and all score invalid, which looks like a model that cannot click.

    Returns:
        A sentence naming the counts and the fix when ``n_outside > n_clicks / 2``, else None.
    """
    if not n_clicks or 2 * n_outside <= n_clicks:
        return None
    return (f"{n_outside} of {n_clicks} clicks lie outside the image in their coordinate frame "
            "(pixel: [0, width] x [0, height]; unit: [0, 1]; thousand: [0, 1000]); were they given in "
            "another frame? Pass the frame the model was asked for (coordinate_frame / --coordinate-frame)")


def aggregate(records: list[dict]) -> dict:
    """All aggregate metrics over scored cases (SPEC §5).

    Returns:
        ``n``, ``n_valid``, ``validity``, ``n_exact``, ``exact_accuracy``,
        ``exact_accuracy_ci`` (Wilson 95% ``[low, high]``), ``errors_after_validity``,
        ``first_violation_counts``, ``first_violation_profile`` (with opportunity
        denominators), ``violation_set_counts`` (key: ``"+"``-joined set or ``"{}"``),
        ``possible_first_violations`` (counts), ``stage_accuracy`` and
        ``dimension_accuracy`` (``{name: {"correct", "applicable", "accuracy"}}``; an
        inapplicable dimension has ``applicable`` 0 and ``accuracy`` None),
        ``applicability`` ({canonical dimension: applicable count}, paper Table 14),
        ``survival``, ``by_format``, ``by_family``, ``by_condition``,
        ``cross_format_consistency``, ``parse_paths``, ``statuses``, ``kinds`` (counts of
        ``reference`` / ``ranking`` / ``click`` predictions; a record without ``kind`` is a
        reference), ``ranking`` (:func:`ranking_summary`, None without rankings) and
        ``click`` (:func:`click_summary`, None without clicks). Ranked and clicked cases
        enter every other figure through the reference they are scored as (the top-1; the
        resolved canonical reference).
    """
    out = _headline(records)
    out["errors_after_validity"] = out["n_valid"] - out["n_exact"]
    first = Counter(r["first_violation"] for r in records)
    out["first_violation_counts"] = {label: first[label] for label in FIRST_VIOLATION_LABELS}
    out["first_violation_profile"] = _first_violation_profile(records)
    sets = Counter("+".join(r["violations"]) or "{}" for r in records)
    out["violation_set_counts"] = dict(sorted(sets.items()))
    possible = Counter(label for r in records for label in r["possible_first_violations"])
    out["possible_first_violations"] = {label: possible[label] for label in FIRST_VIOLATION_LABELS}
    out["stage_accuracy"] = _stage_accuracy(records)
    out["dimension_accuracy"] = _dimension_accuracy(records)
    out["applicability"] = {d: v["applicable"] for d, v in out["dimension_accuracy"].items()}
    out["survival"] = _survival(records)
    out["by_format"] = _breakdown(records, "format")
    out["by_family"] = _breakdown(records, "family")
    out["by_condition"] = _breakdown(records, "condition")
    out["cross_format_consistency"] = cross_format_consistency(records)
    out["parse_paths"] = dict(sorted(Counter(r["parse_path"] for r in records).items()))
    out["statuses"] = dict(sorted(Counter(r["status"] for r in records).items()))
    kinds = Counter(r.get("kind", "reference") for r in records)
    out["kinds"] = {kind: kinds[kind] for kind in PREDICTION_KINDS}
    out["ranking"] = ranking_summary(records)
    out["click"] = click_summary(records)
    return out


# --------------------------------------------------------------------------- paired comparison

_PERM_SUFFIX = re.compile(r"^(?P<parent>.+)__perm(?P<k>\d+)$")


def group_variants(variant_records: list[dict]) -> dict[str, list[tuple[int, dict]]]:
    """Variant rows per parent case id, each with its variant index (SPEC §11 ids).

    A row's parent is its ``parent_case_id`` when the per-case record carries one, else the
    ``<parent>`` of a ``<parent>__perm<k>`` case id, else its own ``case_id`` (the
    column-metadata rows keep their case ids). Its index is ``k`` of ``__perm<k>``, else
    its position among its parent's variant rows, counting from 1.

    Args:
        variant_records: per-case records (:func:`exbind_scoring.score_prediction`).

    Returns:
        ``{parent case id: [(index, record), ...]}`` in input order.

    Raises:
        ValueError: when a case id appears twice.
    """
    out: dict[str, list[tuple[int, dict]]] = {}
    seen: set[str] = set()
    for r in variant_records:
        case_id = r["case_id"]
        if case_id in seen:
            raise ValueError(f"variant_records: case id {case_id!r} appears twice")
        seen.add(case_id)
        match = _PERM_SUFFIX.match(case_id)
        parent = r.get("parent_case_id") or (match.group("parent") if match else case_id)
        rows = out.setdefault(parent, [])
        rows.append((int(match.group("k")) if match else len(rows) + 1, r))
    return out


def paired_comparison(original_records: list[dict], variant_records: list[dict], resamples: int = 10000,
                      seed: int = 20260824, confidence: float = 0.95) -> dict:
    """Paired difference in exact accuracy between two prediction sets on the same parent cases.

    Paper §6.4, A.5-A.6, Tables 9 and 12 (order control: the original order vs the three
    candidate permutations; column-metadata ablation: original vs explicit column field);
    SPEC §5 "paired bootstrap".

    Variant rows are matched to their parent by :func:`group_variants` (``parent_case_id``,
    else a ``<parent>__perm<k>`` case id, else the same case id). For each parent *p*
    present in both sets, ``d_p = mean(exact over p's variant rows) - exact(original p)``;
    the statistic is ``delta = mean_p d_p`` (e.g. 77, 71 and 68 of 120
    exact under three permutations vs 63 of 120 original: ``216/360 - 63/120 = +0.075``).
    The interval is a percentile bootstrap over parents (``scipy.stats.bootstrap``,
    ``method="percentile"``, ``rng=numpy.random.default_rng(seed)``): a parent's repeated
    measurements form one resampling unit, so the variant rows are never treated as
    independent cases.

    Args:
        original_records: per-case records (:func:`exbind_scoring.score_prediction`) of the
            original interface, one per case id.
        variant_records: per-case records of the variant interface (any number of rows per
            parent).
        resamples: bootstrap resamples (paper: 10,000).
        seed: bootstrap seed; the same seed gives the same interval.
        confidence: two-sided level in (0, 1).

    Returns:
        Plain JSON: ``parents`` (paired parents), ``delta`` (float in [-1, 1], None when no
        parent is paired), ``ci`` (``[low, high]``; None with fewer than two parents; the
        point itself when every ``d_p`` is equal), ``original_exact`` (exact count over the
        paired parents), ``variant_exact`` ({variant index as a string: exact count}; the
        index of :func:`group_variants`), ``variant_rows`` ({index: row count}),
        ``improved`` / ``regressed`` (parents with ``d_p > 0`` / ``< 0``), ``order_sensitive`` (parents whose exactness
        differs across the original and its variants), ``unpaired_original`` and
        ``unpaired_variant`` (sorted parent ids present on one side only; never silently
        dropped), ``resamples``, ``seed``, ``confidence``.

    Raises:
        ValueError: when ``original_records`` repeats a case id, or ``variant_records``
            repeats a case id.
    """
    originals: dict[str, int] = {}
    for r in original_records:
        if r["case_id"] in originals:
            raise ValueError(f"original_records: case id {r['case_id']!r} appears twice")
        originals[r["case_id"]] = int(r["scores"]["exact"])
    variants = {parent: [(k, int(r["scores"]["exact"])) for k, r in rows]
                for parent, rows in group_variants(variant_records).items()}
    parents = sorted(set(originals) & set(variants))
    diffs = []
    variant_exact: Counter = Counter()
    variant_rows: Counter = Counter()
    improved = regressed = sensitive = 0
    for p in parents:
        exacts = [e for _, e in variants[p]]
        for k, e in variants[p]:
            variant_exact[str(k)] += e
            variant_rows[str(k)] += 1
        d = sum(exacts) / len(exacts) - originals[p]
        diffs.append(d)
        improved += d > 0
        regressed += d < 0
        sensitive += len(set(exacts) | {originals[p]}) > 1
    delta = float(np.mean(diffs)) if diffs else None
    ci = None
    if len(diffs) >= 2:
        if len(set(diffs)) == 1:
            ci = [delta, delta]
        else:
            res = bootstrap((np.asarray(diffs, dtype=float),), np.mean, n_resamples=resamples,
                            method="percentile", confidence_level=confidence, vectorized=True,
                            rng=np.random.default_rng(seed))
            ci = [float(res.confidence_interval.low), float(res.confidence_interval.high)]
    order = sorted(variant_rows, key=int)
    return {
        "parents": len(parents),
        "delta": delta,
        "ci": ci,
        "original_exact": sum(originals[p] for p in parents),
        "variant_exact": {k: variant_exact[k] for k in order},
        "variant_rows": {k: variant_rows[k] for k in order},
        "improved": improved,
        "regressed": regressed,
        "order_sensitive": sensitive,
        "unpaired_original": sorted(set(originals) - set(variants)),
        "unpaired_variant": sorted(set(variants) - set(originals)),
        "resamples": resamples,
        "seed": seed,
        "confidence": confidence,
    }
