"""Aggregates over scored ExBind cases (docs/specification.md §5, §11; paper §5-6, A.6-A.9).

Input is a list of per-case records from :func:`exbind_scoring.score_prediction`; output
is plain JSON-serializable Python (ints, floats, strings, lists, dicts, None). An undefined
rate is None, never NaN, and n = 0 never raises.

:func:`aggregate` counts the distinct combinations of the fields every figure depends on
(signatures; a release has a few hundred) in C-level passes over the records
(:func:`_signatures`: :func:`_by_key` for scored records, :func:`_signatures_each` for
any others), derives every counter from those counts, and computes each Wilson interval
once at the end (issue 13 item 2). The paired comparison lives in ``exbind_paired``
(re-exported).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from itertools import repeat
from operator import eq, itemgetter, methodcaller

import numpy as np
from numpy import sqrt
from scipy.special import ndtri

try:  # inside evaluate's module cache this file sits in a package beside exbind_scoring
    from .exbind_paired import group_variants, paired_comparison  # noqa: F401  (re-exported)
    from .exbind_vocabulary import (CANONICAL_DIMENSION, CANONICAL_DIMENSIONS, CLICK_CLASSES, DECLARED_ORDERS,
                                    FIRST_VIOLATION_LABELS, PREDICTION_KINDS, RANKING_CUTOFFS)
except ImportError:  # imported from the repository root
    from exbind_paired import group_variants, paired_comparison  # noqa: F401  (re-exported)
    from exbind_vocabulary import (CANONICAL_DIMENSION, CANONICAL_DIMENSIONS, CLICK_CLASSES, DECLARED_ORDERS,
                                   FIRST_VIOLATION_LABELS, PREDICTION_KINDS, RANKING_CUTOFFS)

# Cross-format pair types and their transition direction (docs/specification.md §11: svg -> canvas, tree -> dom).
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
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence} must lie in (0, 1)")
    # scipy.stats.binomtest(k, n).proportion_ci(method="wilson"), operation for operation
    # (Newcombe 1998), without the p-value binomtest computes first (milliseconds per call).
    p = k / n
    z = ndtri(0.5 + 0.5 * confidence)
    denom = 2 * (n + z**2)
    center = (2 * n * p + z**2) / denom
    q = 1 - p
    delta = z / denom * sqrt(4 * n * p * q + z**2)
    low = 0.0 if k == 0 else center - delta
    high = 1.0 if k == n else center + delta
    return [float(max(0.0, low)), float(min(1.0, high))]


def proportion(k: int, n: int) -> dict:
    """``{"k", "n", "rate", "ci"}`` with the Wilson interval."""
    return {"k": k, "n": n, "rate": rate(k, n), "ci": wilson_interval(k, n)}


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
    by_group: dict = defaultdict(dict)  # group_id -> {format: record}; a later record replaces an earlier one
    for r in records:
        group = r.get("group_id")
        if group:
            by_group[group][r["format"]] = r
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
    """R@1, R@5, R@10 and MRR over the ranked cases (docs/specification.md §9; lexical-coupling paper §3).

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
    """Point-in-box and loose accuracy and the click classes (docs/specification.md §9; GUI-Primitives).

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
    """All aggregate metrics over scored cases (docs/specification.md §5).

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
    counts = _signatures(records)
    tally = _Tally()
    for signature, count in counts.items():
        tally.add(signature, count)
    out = tally.headline(len(records), tally.n_valid, tally.n_exact)
    out["errors_after_validity"] = out["n_valid"] - out["n_exact"]
    out["first_violation_counts"] = {label: tally.first[label] for label in FIRST_VIOLATION_LABELS}
    out["first_violation_profile"] = tally.first_violation_profile(len(records))
    out["violation_set_counts"] = dict(sorted(tally.sets.items()))
    out["possible_first_violations"] = {label: tally.possible[label] for label in FIRST_VIOLATION_LABELS}
    out["stage_accuracy"] = {s: {"correct": tally.correct[s], "applicable": tally.applicable[s],
                                 "accuracy": rate(tally.correct[s], tally.applicable[s])}
                             for s in sorted(tally.applicable)}
    out["dimension_accuracy"] = tally.dimension_accuracy()
    out["applicability"] = {d: v["applicable"] for d, v in out["dimension_accuracy"].items()}
    out["survival"] = tally.survival()
    for field in ("format", "family", "condition"):
        groups = tally.groups[field]
        out[f"by_{field}"] = {key: tally.headline(*groups[key]) for key in sorted(groups)}
    out["cross_format_consistency"] = cross_format_consistency(records)
    out["parse_paths"] = dict(sorted(tally.parse_paths.items()))
    out["statuses"] = dict(sorted(tally.statuses.items()))
    out["kinds"] = {kind: tally.kinds[kind] for kind in PREDICTION_KINDS}
    out["ranking"] = ranking_summary(records) if tally.kinds["ranking"] else None
    out["click"] = click_summary(records) if tally.kinds["click"] else None
    return out


_SCALARS = itemgetter("status", "parse_path", "family", "first_violation", "format", "condition")
_SCORES = itemgetter("scores")
_VIOLATIONS = itemgetter("violations")
_POSSIBLE = itemgetter("possible_first_violations")
_REST = itemgetter("scores", "possible_first_violations")
_FORMAT = methodcaller("get", "format")
_CONDITION = methodcaller("get", "condition")
_KIND = methodcaller("get", "kind", "reference")
_FIRST_FOUR = itemgetter("status", "parse_path", "family", "first_violation")


def _signatures(records: list[dict]) -> Counter:
    """Counts of per-record signatures (:func:`_signatures_each`): by :func:`_by_key` when it
    can vouch for the records (scored ones), else by :func:`_signatures_each`. Equal."""
    counts = _by_key(records)
    return _signatures_each(records) if counts is None else counts


def _by_key(records: list[dict]):
    """The :func:`_signatures_each` counts, hashing only ``key = (scalars, violations, kind)``
    per record (issue 13 item 2).

    In a scored record (:func:`exbind_scoring.score_prediction`) the key decides the rest of
    the signature: the scores and the possible first violations follow from the reference's
    stages, the status and the violations. So one pass numbers every record's key (0, 1, ...
    in order of first appearance), a second compares each record's ``(scores,
    possible_first_violations)`` with the first record's of its key (C-level ``==``, no
    hashing), and the signature is built once per key, counted by ``numpy.bincount`` of the
    numbers. ``==`` is the equality the signature counts use (1 == True; a scores dict's
    order changes no figure).

    Returns:
        The counts, or None when a record is not a ``dict``, lacks a field, or differs from
        the first record of its key (a hand-made record); the caller then takes
        :func:`_signatures_each`.
    """
    number: dict = {}  # key -> its number
    try:
        keys = zip(map(_SCALARS, records), map(tuple, map(_VIOLATIONS, records)),
                   map(dict.get, records, repeat("kind"), repeat("reference")))
        # map(len, repeat(number)) yields len(number) just before each setdefault: a new key's number
        numbers = np.fromiter(map(number.setdefault, keys, map(len, repeat(number))), np.intp, len(records))
    except (KeyError, TypeError):
        return None
    # the first record of each key is where the running maximum of the numbers grows
    firsts = np.flatnonzero(np.diff(np.maximum.accumulate(numbers), prepend=-1)).tolist()
    rest = np.empty(len(number), dtype=object)  # key number -> (scores, possible) of its first record
    for code, index in enumerate(firsts):
        rest[code] = _REST(records[index])
    try:
        if not all(map(eq, map(_REST, records), rest[numbers].tolist())):
            return None
    except (TypeError, ValueError):  # a value whose == raises (an array): the caller's error
        return None
    n_of = np.bincount(numbers, minlength=len(number)).tolist()
    counts: Counter = Counter()
    for code, (scalars, violations, kind) in enumerate(number):
        scores, possible = rest[code]
        signature = (scalars, tuple(scores), tuple(dict.values(scores)), violations, tuple(possible), kind)
        counts[signature] += n_of[code]
    return counts


def _signatures_each(records: list[dict]) -> Counter:
    """Counts of per-record signatures: the fields any aggregate figure reads, as a hashable
    tuple ``((status, parse_path, family, first_violation, format, condition), stages, their
    0/1 scores, violations, possible first violations, kind)``, each built by C-level
    ``map``s (no Python call per record). Records without ``format`` or ``condition``
    (hand-made ones) take the same path with ``dict.get`` for those two fields."""
    def build(scalars):
        return zip(scalars, map(tuple, map(_SCORES, records)), map(tuple, map(dict.values, map(_SCORES, records))),
                   map(tuple, map(_VIOLATIONS, records)), map(tuple, map(_POSSIBLE, records)), map(_KIND, records))
    try:
        return Counter(build(map(_SCALARS, records)))
    except KeyError:
        return Counter(build(map(tuple.__add__, map(_FIRST_FOUR, records),
                                 zip(map(_FORMAT, records), map(_CONDITION, records)))))


class _Tally:
    """Counters filled from distinct record signatures weighted by their counts."""

    def __init__(self):
        self.n_valid = self.n_exact = 0
        self.first, self.sets, self.possible = Counter(), Counter(), Counter()
        self.correct, self.applicable = Counter(), Counter()
        self.parse_paths, self.statuses, self.kinds = Counter(), Counter(), Counter()
        self.groups: dict[str, dict] = {"format": {}, "family": {}, "condition": {}}
        self.passed: dict[str, Counter] = {}  # family -> {leading declared stages passed: count}

    def add(self, signature: tuple, c: int) -> None:
        (status, parse_path, family, first, fmt, condition), stages, values, violations, possible, kind = signature
        scores = tuple(zip(stages, values))
        valid, exact = int(status == "valid"), 0
        for stage, score in scores:
            self.applicable[stage] += c
            self.correct[stage] += score * c
            if stage == "exact":
                exact = score
        self.n_valid += valid * c
        self.n_exact += exact * c
        self.first[first] += c
        self.sets["+".join(violations) or "{}"] += c
        for label in possible:
            self.possible[label] += c
        for field, key in (("format", fmt), ("family", family), ("condition", condition)):
            if key is not None:
                row = self.groups[field].setdefault(key, [0, 0, 0])
                row[0] += c
                row[1] += valid * c
                row[2] += exact * c
        order = DECLARED_ORDERS.get(family) if isinstance(family, str) else None
        if order is not None:
            by_stage = dict(scores)
            k = 0
            for stage in order:
                if by_stage.get(stage, 1) != 1:
                    break
                k += 1
            self.passed.setdefault(family, Counter())[k] += c
        self.parse_paths[parse_path] += c
        self.statuses[status] += c
        self.kinds[kind] += c

    @staticmethod
    def headline(n: int, n_valid: int, n_exact: int) -> dict:
        return {"n": n, "n_valid": n_valid, "validity": rate(n_valid, n), "n_exact": n_exact,
                "exact_accuracy": rate(n_exact, n), "exact_accuracy_ci": wilson_interval(n_exact, n)}

    def first_violation_profile(self, n: int) -> dict:
        """Opportunity-normalized first violations (paper Table 15)."""
        out = {}
        for label in FIRST_VIOLATION_LABELS:
            opp = n if label == "none" else self.applicable[label]
            out[label] = {"count": self.first[label], "opportunities": opp, "rate": rate(self.first[label], opp)}
        return out

    def dimension_accuracy(self) -> dict:
        correct = dict.fromkeys(CANONICAL_DIMENSIONS, 0)
        applicable = dict.fromkeys(CANONICAL_DIMENSIONS, 0)
        for stage, count in self.applicable.items():
            dim = CANONICAL_DIMENSION[stage]
            applicable[dim] += count
            correct[dim] += self.correct[stage]
        return {d: {"correct": correct[d], "applicable": applicable[d], "accuracy": rate(correct[d], applicable[d])}
                for d in CANONICAL_DIMENSIONS}

    def survival(self) -> dict:
        """S(k) per family along its declared order; a stage that does not apply counts as passed."""
        out = {}
        for family, order in DECLARED_ORDERS.items():
            passed = self.passed.get(family)
            if not passed:
                continue
            n = sum(passed.values())
            out[family] = [{"stage": stage, "surviving": (alive := sum(c for k, c in passed.items() if k > j)),
                            "n": n, "rate": rate(alive, n)} for j, stage in enumerate(order)]
        return out
