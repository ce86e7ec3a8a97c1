"""Each per-record gate rejects the defect it names; suite-level checks fail when they should;
the gate baselines as predictors reproduce the gate table."""

from __future__ import annotations

import dataclasses
import json

import pytest

from exbind_scoring import score_prediction
from generator import gates
from generator.baselines import lexical_only, random_expectation, structural_oracle, type_only
from composition.release import broad_plans, generate_latent, targeted_plans


def _plan(plans, family, condition=None, slot=0):
    return next(p for p in plans if p.family == family and p.condition == condition and p.slot == slot)


def _reference(rec) -> str:
    return rec.reference_json()


@pytest.fixture(scope="module")
def records():
    b, t = broad_plans(), targeted_plans()
    return {
        "relational": generate_latent(_plan(b, "relational")).records[0],
        "hierarchy": generate_latent(_plan(t, "hierarchy", "depth_2")).records[0],
        "graph": generate_latent(_plan(b, "graph")).records[0],
        "table": generate_latent(_plan(t, "table", "compact")).records[0],
        "conjunctive": generate_latent(_plan(t, "table", "conjunctive")).records[0],
    }


def _with_meaning(rec, candidate_id, **changes):
    cands = [dataclasses.replace(c, meaning=dataclasses.replace(c.meaning, **changes)) if c.candidate_id == candidate_id
             else c for c in rec.case.candidates]
    return rec.with_candidates(cands)


def test_generated_records_pass_every_gate(records):
    for name, rec in records.items():
        suite = "broad" if name in ("relational", "graph") else "targeted"
        assert gates.run_record_gates(rec, _reference(rec), suite) == (True, None), name


def test_leakage_gate_rejects_gold_id_in_instruction(records):
    rec = records["table"]
    gold = rec.gold()["cell_id"]
    leaked = dataclasses.replace(rec, case=dataclasses.replace(rec.case, instruction=rec.case.instruction + f" ({gold})"))
    assert gates.gate_target_id_leakage(leaked, _reference(leaked), "targeted") == (False, "gold id appears in the instruction")
    # the appended id is no template wording, so the visible oracle (an earlier gate) abstains first
    assert gates.run_record_gates(leaked, _reference(leaked), "targeted") == (False, "visible_oracle")


def test_unique_gold_gate_rejects_a_second_satisfying_cell(records):
    rec = records["table"]
    t = rec.case.target
    other_row = next(c for c in rec.case.candidates if c.meaning.row != t.row and c.meaning.column == t.conditions[0][0])
    dup = _with_meaning(rec, other_row.candidate_id, attributes=(("value", t.conditions[0][1]),))
    passed, reason = gates.gate_unique_gold(dup, _reference(dup), "targeted")
    assert (passed, reason) == (False, "2 candidates satisfy the target spec")


def test_mapping_gate_rejects_duplicate_semantic_ids(records):
    rec = records["graph"]
    t = rec.case.target
    a, b = [c for c in rec.case.candidates
            if c.meaning.semantic_id not in (t.source_semantic_id, t.target_semantic_id)][:2]
    dup = _with_meaning(rec, b.candidate_id, semantic_id=a.meaning.semantic_id)
    assert gates.gate_mapping(dup, _reference(dup), "broad") == (False, "duplicate semantic ids (mapping not a bijection)")


def test_degeneracy_gate_rejects_a_target_identifiable_by_attributes(records):
    rec = records["relational"]
    t = rec.case.target
    want = dict(t.attributes)
    twins = [c for c in rec.case.candidates
             if dict(c.meaning.attributes) == want and c.meaning.entity not in (t.entity, t.anchor)]
    assert twins, "the generator always places a same-attribute distractor"
    fixed = rec
    for c in twins:
        fixed = _with_meaning(fixed, c.candidate_id, attributes=(("color", "none"), ("shape", "none")))
    assert gates.gate_degeneracy(fixed, _reference(fixed), "broad") == (False, "target identifiable by attributes alone")


def test_degeneracy_gate_rejects_a_conjunct_that_is_unique_alone(records):
    rec = records["conjunctive"]
    (col, value), _ = rec.case.target.conditions
    holders = [c for c in rec.case.candidates if c.meaning.column == col and dict(c.meaning.attributes)["value"] == value
               and c.meaning.row != rec.case.target.row]
    fixed = rec
    for c in holders:
        fixed = _with_meaning(fixed, c.candidate_id, attributes=(("value", "zzz"),))
    passed, reason = gates.gate_degeneracy(fixed, _reference(fixed), "targeted")
    assert (passed, reason) == (False, f"condition {col}={value!r} alone is unique")


def test_degeneracy_gate_rejects_hierarchy_without_decoys(records):
    rec = records["hierarchy"]
    t = rec.case.target
    keep = [c for c in rec.case.candidates if c.meaning.group == t.group]
    alone = rec.with_candidates(keep)
    assert gates.gate_degeneracy(alone, _reference(alone), "targeted") == (False, "no same-slot decoy in another group")


def test_lexical_gate_rejects_gold_text_matching_the_instruction(records):
    rec = records["table"]
    gold = rec.gold()["cell_id"]
    cands = [dataclasses.replace(c, text=rec.case.instruction) if c.candidate_id == gold else c
             for c in rec.case.candidates]
    leaky = rec.with_candidates(cands)
    assert gates.gate_lexical_only(leaky, _reference(leaky), "targeted") == (False, "lexical-only baseline solves the case")
    assert gates.gate_lexical_only(leaky, _reference(leaky), "broad") == (True, "")


def test_lexical_baseline_picks_the_gold_rows_condition_cell(records):
    rec = records["table"]
    ref = _reference(rec)
    out = json.loads(lexical_only(rec.case.instruction, ref))
    scored = score_prediction(json.dumps(out), ref)
    assert scored["first_violation"] == "table_column"
    assert scored["scores"]["table_row"] == 1
    assert type_only(rec.case.instruction, ref) == ""
    assert json.loads(structural_oracle(rec.case.instruction, ref)) == rec.gold()


def test_random_expectation_counts_ordered_pairs_for_graph(records):
    g = records["graph"]
    n = len(g.case.candidates)
    assert random_expectation(_reference(g)) == pytest.approx(1 / (n * (n - 1)))
    t = records["table"]
    assert random_expectation(_reference(t)) == pytest.approx(1 / len(t.case.candidates))


def test_suite_checks_fail_on_constant_ranks_and_imbalance(records):
    ref = _reference(records["table"])
    check = gates.gold_rank_variation([ref] * 10)
    assert check["passed"] is False and check["distinct_ranks"] == 1 and check["max_rank_share"] == 1.0
    meta = [{"condition": "compact", "template": "a", "column": "x"}] * 3 + [
        {"condition": "compact", "template": "b", "column": "x"}]
    assert gates.balance_check(meta)["passed"] is False
    meta = [{"condition": "compact", "template": t, "column": c} for t in "ab" for c in "xy"]
    assert gates.balance_check(meta)["passed"] is True


def test_degeneracy_gate_rejects_a_table_row_without_two_cells_outside_the_conditions(records):
    rec = records["table"]
    t = rec.case.target
    (cond_col, _), = t.conditions
    # keep only the target cell and the condition column: one cell left outside the conditions
    keep = [c for c in rec.case.candidates if c.meaning.column in (t.column, cond_col)]
    narrow = rec.with_candidates(keep)
    assert gates.gate_degeneracy(narrow, _reference(narrow), "targeted") == (
        False, "1 cell(s) of the target row remain outside the condition columns")
    assert gates.gate_degeneracy(rec, _reference(rec), "targeted") == (True, "")


def test_gold_rank_variation_requires_rank_13_plus_only_and_mostly_in_high_candidate(records):
    base = json.loads(_reference(records["table"]))

    def ref(condition, rank):
        return json.dumps({**base, "condition": condition, "gold_rank": rank})

    small = [ref("compact", r) for r in range(1, 13)] + [ref("conjunctive", r) for r in range(1, 13)]
    high = [ref("high_candidate", r) for r in (3, 14, 20, 30, 41)]
    ok = gates.gold_rank_variation(small + high)
    assert ok["passed"] is True and ok["ranks_13_plus_by_condition"] == {
        "compact": 0, "conjunctive": 0, "high_candidate": 4}
    leaky = gates.gold_rank_variation(small + high + [ref("conjunctive", 14)])
    assert leaky["passed"] is False and leaky["ranks_13_plus_by_condition"]["conjunctive"] == 1
    mostly_low = gates.gold_rank_variation(small + [ref("high_candidate", r) for r in (3, 4, 5, 30)])
    assert mostly_low["passed"] is False and mostly_low["high_candidate_ranks_13_plus"] == 1


def test_balance_check_counts_row_name_targets_and_phrasings():
    meta = [{"condition": "compact", "template": "a", "column": c, "row_name": c == "name", "phrasing": p}
            for c, p in (("name", 0), ("x", 1), ("y", 0), ("name", 1))]
    check = gates.balance_check(meta)
    assert check["passed"] is True
    assert check["conditions"]["compact"]["row_name_targets"] == 2
    assert check["conditions"]["compact"]["phrasings"] == {0: 2, 1: 2}
    no_name = [{**m, "row_name": False} for m in meta]
    assert gates.balance_check(no_name)["passed"] is False
    skewed = [{**m, "phrasing": 0} for m in meta[:3]] + [{**meta[3], "phrasing": 1}]
    assert gates.balance_check(skewed)["conditions"]["compact"]["phrasings"] == {0: 3, 1: 1}
    assert gates.balance_check(skewed)["passed"] is False
