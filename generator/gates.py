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


_ID_CHARS = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")


def count_id(text: str, ident: str) -> int:
    """Occurrences of ``ident`` in ``text`` not followed by an id character ``[0-9A-Za-z_]``.

    The same count as ``len(re.findall(re.escape(ident) + r"(?![0-9A-Za-z_])", text))``
    (non-overlapping, scanning left to right), with ``str.find`` instead of a regex per id.
    """
    count, start, size = 0, text.find(ident), len(ident)
    while start >= 0:
        end = start + size
        if end < len(text) and text[end] in _ID_CHARS:
            start = text.find(ident, start + 1)
        else:
            count += 1
            start = text.find(ident, end)
    return count


def gate_target_id_leakage(rec: ExBindRecord, reference: str, suite: str):
    """Gold ids absent from the instruction; in the observation no more or less frequent
    than comparable distractor ids; opaque ids carry no instruction word."""
    ref = load_reference(reference)
    source = rec.case.source
    for gold_id in _gold_ids(ref):
        if gold_id in rec.case.instruction:
            return False, "gold id appears in the instruction"
        gold_type = ref["_by_id"][gold_id]["type"]
        counts = [count_id(source, c["id"]) for c in ref["candidates"] if c["type"] == gold_type and c["id"] != gold_id]
        own = count_id(source, gold_id)
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


class RankVariation:
    """Streaming form of :func:`gold_rank_variation`: :meth:`add` one case at a time, :meth:`result` at the end."""

    def __init__(self, high_candidate_conditions=("high_candidate",)):
        self.high_conditions = tuple(high_candidate_conditions)
        self.ranks: Counter = Counter()
        self.ranks_13_plus: Counter = Counter()
        self.high: Counter = Counter()  # gold ranks of high-candidate cases

    def add(self, condition, gold_rank: int) -> None:
        """Count one case: its condition (None for broad) and 1-based gold rank."""
        self.ranks[gold_rank] += 1
        self.ranks_13_plus[condition or "none"] += int(gold_rank >= 13)
        if condition in self.high_conditions:
            self.high[gold_rank] += 1

    def result(self) -> dict:
        """The check's table; see :func:`gold_rank_variation`."""
        n = sum(self.ranks.values())
        n_high = sum(self.high.values())
        checks = {
            "distinct_ranks": len(self.ranks),
            "max_rank_share": max(self.ranks.values()) / n if n else None,
            "high_candidate_ranks_13_plus": sum(k for r, k in self.high.items() if r >= 13),
            "ranks_13_plus_by_condition": dict(sorted(self.ranks_13_plus.items())),
        }
        passed = n > 0 and len(self.ranks) >= 5 and checks["max_rank_share"] <= 0.5
        if n_high:
            elsewhere = sum(v for c, v in self.ranks_13_plus.items() if c not in self.high_conditions)
            passed = passed and 2 * checks["high_candidate_ranks_13_plus"] > n_high and elsewhere == 0
        return {"passed": bool(passed), **checks}


def gold_rank_variation(references: list[str], high_candidate_conditions=("high_candidate",)) -> dict:
    """Gold-rank variation check (docs/specification.md §7; paper Table 6, §6.4).

    Passes when there are at least 5 distinct gold ranks and no rank holds more than half
    the cases; and, when a high-candidate condition is present, ranks 13+ are sparse: they
    occur in most (more than half) of its cases and in no case of any other condition.

    Returns:
        ``{"passed", "distinct_ranks", "max_rank_share", "high_candidate_ranks_13_plus",
        "ranks_13_plus_by_condition"}`` (counts per condition, ``"none"`` for null).
    """
    acc = RankVariation(high_candidate_conditions)
    for r in references:
        ref = load_reference(r)
        acc.add(ref.get("condition"), ref["gold_rank"])
    return acc.result()


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


_GATE_BASELINES = {"structural_oracle": structural_oracle, "lexical_only": lexical_only, "type_only": type_only}


def gate_table_case(reference: str, instruction: str) -> tuple:
    """One accepted case's contribution to :class:`GateTable` (computed where the case is
    generated, so the parent only adds numbers): ``(condition, unique_gold, structural_oracle,
    lexical_only, type_only, leaked, random_expectation)``; the reference is parsed once."""
    ref = load_reference(reference)
    exact = [score_prediction(fn(instruction, reference), reference)["scores"]["exact"]
             for fn in _GATE_BASELINES.values()]
    leaked = any(g in instruction for g in ref["gold"].values())
    return (ref.get("condition"), len(execute_target(ref)) == 1, *exact, leaked, random_expectation(reference))


class GateTable:
    """Streaming paper Table 6 summary of one suite: :meth:`add` each accepted case (in
    release order), :meth:`result` once; memory does not grow with the suite."""

    def __init__(self):
        self.n = self.unique = self.leaks = 0
        self.exact = {name: 0 for name in _GATE_BASELINES}
        self.random_sum = 0.0
        self.by_condition: dict = {}  # condition -> [sum of 1/|C|, cases]

    def add(self, case: tuple) -> None:
        """Add one :func:`gate_table_case` tuple."""
        condition, unique, *exact, leaked, rnd = case
        self.n += 1
        self.unique += bool(unique)
        for name, value in zip(self.exact, exact):
            self.exact[name] += value
        self.leaks += bool(leaked)
        self.random_sum += rnd
        entry = self.by_condition.setdefault(condition, [0.0, 0])
        entry[0] += rnd
        entry[1] += 1

    def result(self, attempts: dict) -> dict:
        """The table; see :func:`gate_table`."""
        n = self.n

        def share(k):
            return k / n if n else None

        return {
            "n": n,
            "unique_gold": {"passed": self.unique, "n": n},
            "structural_oracle": share(self.exact["structural_oracle"]),
            "target_id_leakage": share(self.leaks),
            "lexical_only": share(self.exact["lexical_only"]),
            "type_only": share(self.exact["type_only"]),
            "random_expectation": share(self.random_sum),
            "random_expectation_by_condition": {str(c) if c is not None else "none": total / k for c, (total, k)
                                                in sorted(self.by_condition.items(), key=lambda kv: str(kv[0]))},
            "attempted": attempts["attempted"],
            "accepted": attempts["accepted"],
            "rejected": dict(sorted(attempts["rejected"].items())),
        }


def gate_table(references: list[str], instructions: list[str], attempts: dict) -> dict:
    """The paper Table 6 summary over accepted records of one suite.

    ``random_expectation`` is mean(1/|C|) over the suite (graph: over ordered pairs);
    ``random_expectation_by_condition`` the same mean per condition (``"none"`` for broad).
    One pass, each reference parsed once (linear in the suite size; :class:`GateTable`).

    Args:
        references: the suite's reference strings.
        instructions: the matching instructions.
        attempts: ``{"attempted": int, "accepted": int, "rejected": {gate: count}}``.
    """
    table = GateTable()
    for reference, instruction in zip(references, instructions):
        table.add(gate_table_case(reference, instruction))
    return table.result(attempts)


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
