"""Paired comparison of two prediction sets on the same parent cases (paper §6.4, A.5-A.6).

The order control (original vs three candidate permutations) and the column-metadata
ablation compare exact accuracy per parent case with a paired bootstrap over parents
(docs/specification.md §5). Re-exported by ``exbind_aggregate``.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

_PERM_SUFFIX = re.compile(r"^(?P<parent>.+)__perm(?P<k>\d+)$")


def group_variants(variant_records: list[dict]) -> dict[str, list[tuple[int, dict]]]:
    """Variant rows per parent case id, each with its variant index (docs/specification.md §11 ids).

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
    docs/specification.md §5 "paired bootstrap".

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
            from scipy.stats import bootstrap  # imported here: scipy.stats costs ~0.45 s, needed only now

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
