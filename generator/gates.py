"""Integrity and shortcut gates (docs/specification.md §7; paper §4.4-4.5, Table 6, Algorithm 1 step 8).

Per-record gates are named functions ``gate(record, reference, suite) -> (passed, reason)``;
a failing record is rejected and regenerated from the next attempt's seed, and the build
counts rejections by gate. Suite-level checks (:func:`suite_checks`) fail the build instead.
Every gate reads the one reference payload and scores through the core scorer
(``exbind_scoring``), never through ``evaluate.load``.
"""

from __future__ import annotations

import json
import re
from collections import Counter

from exbind_scoring import execute_target, load_reference, relation_holds, score_prediction, tokenize
from generator.baselines import lexical_only, random_expectation, structural_oracle, type_only
from generator.families.relational import OPPOSITE
from generator.records import ExBindRecord
from generator.visible_oracle import visible_answer


def _gold_ids(ref: dict) -> list[str]:
    return list(ref["gold"].values())


def gate_nonempty_candidates(rec: ExBindRecord, reference: str, suite: str):
    """The candidate inventory is not empty."""
    return (len(rec.case.candidates) > 0, "empty candidate inventory")


def gate_mapping(rec: ExBindRecord, reference: str, suite: str):
    """M_f is a bijection on the inventory and gold equals the mapped target."""
    ids = [c.candidate_id for c in rec.case.candidates]
    sems = [c.meaning.semantic_id for c in rec.case.candidates]
    if len(set(ids)) != len(ids):
        return False, "duplicate candidate ids"
    if len(set(sems)) != len(sems):
        return False, "duplicate semantic ids (mapping not a bijection)"
    ref = load_reference(reference)
    try:
        mapped = rec.case.gold()
    except KeyError as exc:
        return False, f"target not in mapping: {exc}"
    return (mapped == ref["gold"], "gold differs from the mapped target")


def gate_unique_gold(rec: ExBindRecord, reference: str, suite: str):
    """Exactly one candidate (graph: one ordered pair) satisfies the target spec."""
    hits = execute_target(load_reference(reference))
    return (len(hits) == 1, f"{len(hits)} candidates satisfy the target spec")


def gate_structural_oracle(rec: ExBindRecord, reference: str, suite: str):
    """The latent executor's answer, scored by the core scorer, is exact."""
    record = score_prediction(structural_oracle(rec.case.instruction, reference), reference)
    return (record["scores"]["exact"] == 1, "structural oracle is not exact")


def visible_oracle_output(rec: ExBindRecord) -> str:
    """The visible oracle's raw output for a record (``""`` when it abstains)."""
    answer = visible_answer(rec.to_row(), rec.image_png)
    return json.dumps(answer) if answer is not None else ""


def gate_visible_oracle(rec: ExBindRecord, reference: str, suite: str):
    """The visible oracle, reading only what the model is shown, answers exactly and uniquely."""
    output = visible_oracle_output(rec)
    if not output:
        return False, "visible inputs do not single out one answer"
    return (score_prediction(output, reference)["scores"]["exact"] == 1, "visible oracle answers wrongly")


def gate_target_id_leakage(rec: ExBindRecord, reference: str, suite: str):
    """Gold ids absent from the instruction; in the observation no more or less frequent
    than comparable distractor ids; opaque ids carry no instruction word."""
    ref = load_reference(reference)
    source = rec.case.source
    for gold_id in _gold_ids(ref):
        if gold_id in rec.case.instruction:
            return False, "gold id appears in the instruction"
        gold_type = ref["_by_id"][gold_id]["type"]
        counts = [len(re.findall(re.escape(c["id"]) + r"(?![0-9A-Za-z_])", source))
                  for c in ref["candidates"] if c["type"] == gold_type and c["id"] != gold_id]
        own = len(re.findall(re.escape(gold_id) + r"(?![0-9A-Za-z_])", source))
        if counts and not (min(counts) <= own <= max(counts)):
            return False, f"gold id occurs {own}x in the observation, distractors {min(counts)}-{max(counts)}x"
    if rec.case.format != "table":
        words = {w for w in tokenize(rec.case.instruction) if len(w) > 2}
        for c in rec.case.candidates:
            if words & set(re.split(r"[^a-z0-9]+", c.candidate_id.lower())):
                return False, f"candidate id {c.candidate_id!r} contains an instruction word"
    return True, ""


def gate_lexical_only(rec: ExBindRecord, reference: str, suite: str):
    """On the targeted suite the lexical-only baseline must not solve the case."""
    if suite != "targeted":
        return True, ""
    solved = score_prediction(lexical_only(rec.case.instruction, reference), reference)["scores"]["exact"]
    return (solved == 0, "lexical-only baseline solves the case")


def gate_type_only(rec: ExBindRecord, reference: str, suite: str):
    """On the targeted suite the type-only baseline must not solve the case."""
    if suite != "targeted":
        return True, ""
    solved = score_prediction(type_only(rec.case.instruction, reference), reference)["scores"]["exact"]
    return (solved == 0, "type-only baseline solves the case")


def gate_degeneracy(rec: ExBindRecord, reference: str, suite: str):
    """CLEVR-style degeneracy: every structural constraint must be needed.

    relational: the target's attributes alone do not single it out, and the relation is
    necessary: with the direction word removed (the target's attributes on the relation's
    axis, either side of the anchor: :func:`exbind_scoring.relation_holds` with the relation
    or its opposite) at least two candidates still fit; table: at least two cells of the
    target row lie outside the condition columns (the requested column must be read) and,
    with several conditions, each alone matches several rows; hierarchy (port targets): a
    same-slot decoy exists in another group and a same-group decoy with the other role exists.
    """
    ref = load_reference(reference)
    target, cands, family = ref["target"], ref["candidates"], ref["family"]
    canon = [c for c in cands if c.get("canonical", True)]
    if family == "relational":
        want = target.get("attributes") or {}
        same = [c for c in canon if all((c.get("attributes") or {}).get(k) == v for k, v in want.items())
                and c["entity"] != target.get("anchor")]
        if len(same) < 2:
            return False, "target identifiable by attributes alone"
        relation, anchor_pos = target.get("relation"), target.get("anchor_position")
        on_axis = [c for c in same if any(relation_holds(r, c.get("position"), anchor_pos)
                                          for r in (relation, OPPOSITE.get(relation)))]
        return (len(on_axis) >= 2, "relation unnecessary: without the direction word one candidate fits")
    if family == "table":
        rows: dict = {}
        for c in canon:
            rows.setdefault(c["row"], {})[c["column"]] = (c.get("attributes") or {}).get("value")
        conditions = target.get("conditions") or []
        cond_columns = {col for col, _ in conditions}
        left = [col for col in rows.get(target.get("row"), {}) if col not in cond_columns]
        if len(left) < 2:
            return False, f"{len(left)} cell(s) of the target row remain outside the condition columns"
        if len(conditions) > 1:
            for col, value in conditions:
                if sum(values.get(col) == value for values in rows.values()) < 2:
                    return False, f"condition {col}={value!r} alone is unique"
        return True, ""
    if family == "hierarchy" and target.get("role") is not None:
        slot = [c for c in canon if c.get("path") == target.get("path") and c.get("kind") == target.get("kind")]
        other_group = any(c.get("group") != target["group"] and c.get("role") == target["role"] for c in slot)
        other_role = any(c.get("group") == target["group"] and c.get("role") not in (None, target["role"])
                         for c in slot)
        if not other_group:
            return False, "no same-slot decoy in another group"
        if not other_role:
            return False, "no same-group decoy with the other role"
    return True, ""


RECORD_GATES = {
    "nonempty_candidates": gate_nonempty_candidates,
    "mapping": gate_mapping,
    "unique_gold": gate_unique_gold,
    "structural_oracle": gate_structural_oracle,
    "visible_oracle": gate_visible_oracle,
    "target_id_leakage": gate_target_id_leakage,
    "lexical_only": gate_lexical_only,
    "type_only": gate_type_only,
    "degeneracy": gate_degeneracy,
}


def run_record_gates(rec: ExBindRecord, reference: str, suite: str) -> tuple[bool, str | None]:
    """Run every per-record gate in order; returns ``(accepted, first failing gate name)``."""
    for name, gate in RECORD_GATES.items():
        passed, _ = gate(rec, reference, suite)
        if not passed:
            return False, name
    return True, None


# --------------------------------------------------------------------------- suite level


def gold_rank_variation(references: list[str], high_candidate_conditions=("high_candidate",)) -> dict:
    """Gold-rank variation check (docs/specification.md §7; paper Table 6, §6.4).

    Passes when there are at least 5 distinct gold ranks and no rank holds more than half
    the cases; and, when a high-candidate condition is present, ranks 13+ are sparse: they
    occur in most (more than half) of its cases and in no case of any other condition.

    Returns:
        ``{"passed", "distinct_ranks", "max_rank_share", "high_candidate_ranks_13_plus",
        "ranks_13_plus_by_condition"}`` (counts per condition, ``"none"`` for null).
    """
    refs = [load_reference(r) for r in references]
    ranks = Counter(r["gold_rank"] for r in refs)
    n = len(refs)
    high = [r["gold_rank"] for r in refs if r.get("condition") in high_candidate_conditions]
    by_condition: Counter = Counter()
    for r in refs:
        by_condition[r.get("condition") or "none"] += int(r["gold_rank"] >= 13)
    checks = {
        "distinct_ranks": len(ranks),
        "max_rank_share": max(ranks.values()) / n if n else None,
        "high_candidate_ranks_13_plus": sum(r >= 13 for r in high),
        "ranks_13_plus_by_condition": dict(sorted(by_condition.items())),
    }
    passed = n > 0 and len(ranks) >= 5 and checks["max_rank_share"] <= 0.5
    if high:
        elsewhere = sum(v for c, v in by_condition.items() if c not in high_candidate_conditions)
        passed = passed and 2 * checks["high_candidate_ranks_13_plus"] > len(high) and elsewhere == 0
    return {"passed": bool(passed), **checks}


def balance_check(rows_meta: list[dict]) -> dict:
    """Balance within each condition (docs/specification.md §6; paper §6.4: "target column and template
    family are balanced within each condition").

    Args:
        rows_meta: one dict per case with ``condition``, ``template``, ``column`` (target
            column) and optionally ``row_name`` (target is the row-name column) and
            ``phrasing`` (instruction template index).

    Returns:
        ``{"passed", "conditions": {condition: {"templates", "columns", "row_name_targets",
        "phrasings", "passed"}}}``. A condition passes when template counts are equal,
        target-column counts differ by at most one within each template, phrasing counts
        (when given) differ by at most one, and, when ``row_name`` is given, the row-name
        column is the target at least once.
    """
    by_cond: dict = {}
    for m in rows_meta:
        by_cond.setdefault(m["condition"], []).append(m)
    report, passed = {}, True
    for cond, items in sorted(by_cond.items(), key=lambda kv: str(kv[0])):
        templates = Counter(m["template"] for m in items)
        ok = len(set(templates.values())) == 1
        columns = {}
        for tmpl in sorted(templates):
            cols = Counter(m["column"] for m in items if m["template"] == tmpl)
            columns[tmpl] = dict(sorted(cols.items()))
            ok = ok and max(cols.values()) - min(cols.values()) <= 1
        entry = {"templates": dict(sorted(templates.items())), "columns": columns}
        if all("row_name" in m for m in items):
            entry["row_name_targets"] = sum(bool(m["row_name"]) for m in items)
            ok = ok and entry["row_name_targets"] > 0
        if all("phrasing" in m for m in items):
            phrasings = Counter(m["phrasing"] for m in items)
            entry["phrasings"] = dict(sorted(phrasings.items()))
            ok = ok and max(phrasings.values()) - min(phrasings.values()) <= 1
        entry["passed"] = ok
        report[cond if cond is not None else "none"] = entry
        passed = passed and ok
    return {"passed": passed, "conditions": report}


def gate_table(references: list[str], instructions: list[str], attempts: dict) -> dict:
    """The paper Table 6 summary over accepted records of one suite.

    ``random_expectation`` is mean(1/|C|) over the suite (graph: over ordered pairs);
    ``random_expectation_by_condition`` the same mean per condition (``"none"`` for broad).

    Args:
        references: the suite's reference strings.
        instructions: the matching instructions.
        attempts: ``{"attempted": int, "accepted": int, "rejected": {gate: count}}``.
    """
    n = len(references)
    unique = sum(len(execute_target(load_reference(r))) == 1 for r in references)
    scores = {name: 0 for name in ("structural_oracle", "lexical_only", "type_only")}
    fns = {"structural_oracle": structural_oracle, "lexical_only": lexical_only, "type_only": type_only}
    leaks = 0
    for ref_str, instr in zip(references, instructions):
        for name, fn in fns.items():
            scores[name] += score_prediction(fn(instr, ref_str), ref_str)["scores"]["exact"]
        ref = load_reference(ref_str)
        leaks += any(g in instr for g in ref["gold"].values())
    rnd = [random_expectation(r) for r in references]
    by_condition: dict = {}
    for ref_str, value in zip(references, rnd):
        by_condition.setdefault(load_reference(ref_str).get("condition"), []).append(value)
    return {
        "n": n,
        "unique_gold": {"passed": unique, "n": n},
        "structural_oracle": scores["structural_oracle"] / n if n else None,
        "target_id_leakage": leaks / n if n else None,
        "lexical_only": scores["lexical_only"] / n if n else None,
        "type_only": scores["type_only"] / n if n else None,
        "random_expectation": sum(rnd) / n if n else None,
        "random_expectation_by_condition": {str(c) if c is not None else "none": sum(v) / len(v)
                                            for c, v in sorted(by_condition.items(), key=lambda kv: str(kv[0]))},
        "attempted": attempts["attempted"],
        "accepted": attempts["accepted"],
        "rejected": dict(sorted(attempts["rejected"].items())),
    }


def visible_oracle_check(records: list[ExBindRecord]) -> dict:
    """The visible oracle over one config's released rows (suite-level; controls included).

    The per-record gate already rejected undecidable cases at generation time; this re-runs
    the oracle on the rows as released (after permutation or the column-metadata ablation)
    so every config's figure is measured, not assumed. Passes only at 1.000.

    Returns:
        ``{"n": int, "exact": int, "accuracy": float | None, "abstained": int, "passed": bool}``.
    """
    exact = abstained = 0
    for rec in records:
        output = visible_oracle_output(rec)
        if not output:
            abstained += 1
            continue
        exact += score_prediction(output, rec.reference_json())["scores"]["exact"]
    n = len(records)
    return {"n": n, "exact": exact, "accuracy": exact / n if n else None, "abstained": abstained,
            "passed": n > 0 and exact == n}
