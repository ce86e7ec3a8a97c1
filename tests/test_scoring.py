"""Per-case scorer contract (docs/specification.md §4, §11; paper §3 eq. 3, A.3, A.7, Table 15).

Every test scores real references from generated cases (broad + targeted suites, built
once per module with :func:`composition.release.generate_latent`) and checks exact score
vectors, violation sets and first-violation labels.
"""

from __future__ import annotations

import itertools
import json

import pytest

from exbind_scoring import (
    DECLARED_ORDERS,
    REFERENCE_SCHEMA,
    ReferenceError,
    load_reference,
    parse_prediction,
    relation_holds,
    score_prediction,
)
from composition.release import broad_plans, generate_latent, targeted_plans

# Labels that can never come first under the declared orders (docs/specification.md §4; paper Table 15).
NEVER_FIRST = {
    "relational": ("attribute", "anchor", "relation"),
    "graph": ("relation",),
    "table": ("table_cell",),
}
ENUMERATED_CASES_PER_FAMILY = 36


@pytest.fixture(scope="module")
def cases() -> dict[str, list]:
    """``{family: [(ExBindRecord, reference JSON string)]}`` over broad + targeted, plan order."""
    out: dict[str, list] = {}
    for plan in broad_plans() + targeted_plans():
        generated = generate_latent(plan)
        for rec, ref in zip(generated.records, generated.references):
            out.setdefault(rec.case.family, []).append((rec, ref))
    return out


def _by_format(cases, fmt):
    return [(rec, ref) for fam in cases.values() for rec, ref in fam if rec.case.format == fmt]


def _score(prediction, reference: str) -> dict:
    text = prediction if isinstance(prediction, str) else json.dumps(prediction)
    return score_prediction(text, reference)


def _gold(rec) -> dict:
    return dict(rec.gold())


def _cand(rec, candidate_id):
    return next(c for c in rec.case.candidates if c.candidate_id == candidate_id)


def _zero_scores(rec) -> dict:
    """Score vector of an invalid/unresolved prediction: every applicable stage 0."""
    return {stage: 0 for stage in DECLARED_ORDERS[rec.case.family]}


def _valid_scores(rec, **zeros) -> dict:
    scores = {stage: 1 for stage in DECLARED_ORDERS[rec.case.family]}
    scores.update(zeros)
    return scores


def test_case_pool_sizes(cases):
    """The pool the other tests iterate over (broad 250 rows + targeted 240 rows)."""
    assert {fam: len(v) for fam, v in cases.items()} == {
        "relational": 75, "hierarchy": 195, "graph": 50, "table": 170,
    }


# --------------------------------------------------------------------------- docs/specification.md §4 worked examples


def test_table_worked_example_same_row_other_column(cases):
    """docs/specification.md §4: gold cell_r01_c01, prediction cell_r01_c00 -> first violation table_column."""
    rec, ref = next((r, s) for r, s in cases["table"] if _gold(r) == {"cell_id": "cell_r01_c01"})
    out = _score('{"cell_id": "cell_r01_c00"}', ref)
    assert out["status"] == "valid"
    assert out["parse_path"] == "strict"
    assert out["predicted"] == {"cell_id": "cell_r01_c00"}
    assert out["scores"] == {"candidate_valid": 1, "table_row": 1, "table_column": 0, "table_cell": 0, "exact": 0}
    assert list(out["scores"]) == ["candidate_valid", "table_row", "table_column", "table_cell", "exact"]
    assert out["violations"] == ["table_column", "table_cell"]
    assert out["first_violation"] == "table_column"
    assert out["possible_first_violations"] == ["table_column", "table_cell"]
    assert out["reason"] is None
    wrong = _cand(rec, "cell_r01_c00").meaning
    assert wrong.row == 1 and wrong.column != rec.case.target.column
    assert out["predicted_latent"] == {"entity": wrong.entity, "semantic_id": wrong.semantic_id}
    assert out["case_id"] == rec.id and out["family"] == "table" and out["format"] == "table"


def test_every_table_case_same_row_other_column_is_table_column(cases):
    checked = 0
    for rec, ref in cases["table"]:
        gold_id = _gold(rec)["cell_id"]
        row, col = int(gold_id[6:8]), int(gold_id[10:12])
        others = [c.candidate_id for c in rec.case.candidates
                  if c.meaning.row == row and c.candidate_id != gold_id]
        assert others, rec.id
        for other in others:
            assert other.startswith(f"cell_r{row:02d}_c") and other != f"cell_r{row:02d}_c{col:02d}"
            out = _score({"cell_id": other}, ref)
            assert out["scores"] == {"candidate_valid": 1, "table_row": 1, "table_column": 0, "table_cell": 0,
                                     "exact": 0}, (rec.id, other)
            assert out["first_violation"] == "table_column"
            checked += 1
    # broad 25 x 3 + 25 x 4, targeted 40 x 3 + 40 x 4 + 40 x 4 other cells in the gold row
    assert checked == 615


def test_table_other_row_same_column_is_table_row(cases):
    rec, ref = cases["table"][0]
    gold_id = _gold(rec)["cell_id"]
    col = gold_id[-3:]
    other = next(c.candidate_id for c in rec.case.candidates
                 if c.candidate_id.endswith(col) and c.candidate_id != gold_id)
    out = _score({"cell_id": other}, ref)
    assert out["scores"] == {"candidate_valid": 1, "table_row": 0, "table_column": 1, "table_cell": 0, "exact": 0}
    assert out["violations"] == ["table_row", "table_cell"]
    assert out["first_violation"] == "table_row"


def test_graph_reversed_endpoints_is_role(cases):
    """docs/specification.md §4: gold (A -> B), prediction (B -> A) -> identity 1, relation 1, role 0; first role."""
    for rec, ref in cases["graph"]:
        gold = _gold(rec)
        out = _score({"source_id": gold["target_id"], "target_id": gold["source_id"]}, ref)
        assert out["status"] == "valid", rec.id
        assert out["scores"] == {"candidate_valid": 1, "identity": 1, "relation": 1, "role": 0, "exact": 0}
        assert out["violations"] == ["role"]
        assert out["first_violation"] == "role"
        assert out["possible_first_violations"] == ["role"]
        t = rec.case.target
        assert out["predicted_latent"] == {"source": t.target, "target": t.source}
    assert len(cases["graph"]) == 50


def test_graph_gold_is_exact_and_same_node_twice_is_identity(cases):
    rec, ref = cases["graph"][0]
    gold = _gold(rec)
    exact = _score(gold, ref)
    assert exact["scores"] == {"candidate_valid": 1, "identity": 1, "relation": 1, "role": 1, "exact": 1}
    assert exact["violations"] == [] and exact["first_violation"] == "none"
    assert exact["possible_first_violations"] == ["none"]
    same = _score({"source_id": gold["source_id"], "target_id": gold["source_id"]}, ref)
    assert same["status"] == "valid"
    assert same["scores"] == {"candidate_valid": 1, "identity": 0, "relation": 0, "role": 0, "exact": 0}
    assert same["first_violation"] == "identity"


def test_unknown_id_is_invalid_with_reason(cases):
    rec, ref = cases["table"][0]
    out = _score({"cell_id": "cell_r99_c09"}, ref)
    assert out["status"] == "invalid"
    assert out["parse_path"] == "strict"
    assert out["predicted"] == {"cell_id": "cell_r99_c09"}
    assert out["predicted_latent"] is None
    assert out["reason"] == "id 'cell_r99_c09' is not in the candidate inventory"
    assert out["scores"] == _zero_scores(rec)
    assert out["violations"] == ["candidate_valid"]
    assert out["first_violation"] == "candidate_valid"
    assert out["possible_first_violations"] == ["candidate_valid"]


def test_graph_one_unknown_endpoint_is_invalid(cases):
    rec, ref = cases["graph"][0]
    gold = _gold(rec)
    out = _score({"source_id": gold["source_id"], "target_id": "g_zzzz"}, ref)
    assert out["status"] == "invalid"
    assert out["reason"] == "id 'g_zzzz' is not in the candidate inventory"
    assert out["scores"] == {"candidate_valid": 0, "identity": 0, "relation": 0, "role": 0, "exact": 0}


def test_unrecoverable_text_is_unresolved(cases):
    """docs/specification.md §4: '{cell_id: x' with no recoverable object -> unresolved, parse_path failed."""
    rec, ref = cases["table"][0]
    out = _score("{cell_id: x", ref)
    assert out["status"] == "unresolved"
    assert out["parse_path"] == "failed"
    assert out["predicted"] is None and out["predicted_latent"] is None
    assert out["reason"] == "no JSON object with a recognised key"
    assert out["scores"] == {"candidate_valid": 0, "table_row": 0, "table_column": 0, "table_cell": 0, "exact": 0}
    assert out["violations"] == ["candidate_valid"]
    assert out["first_violation"] == "candidate_valid"


# --------------------------------------------------------------------------- parse paths


@pytest.fixture(scope="module")
def table_case(cases):
    """(record, reference, gold id, another valid id) of the first broad table case."""
    rec, ref = cases["table"][0]
    gold_id = _gold(rec)["cell_id"]
    other = next(c.candidate_id for c in rec.case.candidates if c.candidate_id != gold_id)
    return rec, ref, gold_id, other


def test_parse_strict(table_case):
    rec, ref, gold_id, _ = table_case
    for text in (f'{{"cell_id": "{gold_id}"}}', f'\n  {{"cell_id":"{gold_id}"}}  \n'):
        out = _score(text, ref)
        assert (out["status"], out["parse_path"], out["first_violation"]) == ("valid", "strict", "none")
        assert out["scores"] == _valid_scores(rec)


@pytest.mark.parametrize("template", [
    "```json\n{answer}\n```",
    "```\n{answer}\n```",
    "Here is my answer:\n```json\n{answer}\n```\nHope that helps.",
    "```JSON {answer}```",
])
def test_parse_fenced(table_case, template):
    rec, ref, gold_id, _ = table_case
    out = _score(template.replace("{answer}", json.dumps({"cell_id": gold_id})), ref)
    assert (out["status"], out["parse_path"], out["first_violation"]) == ("valid", "fenced", "none")
    assert out["predicted"] == {"cell_id": gold_id}


def test_parse_extracted_takes_last_object_with_recognised_key(table_case):
    rec, ref, gold_id, other = table_case
    out = _score(f'The answer is {{"cell_id": "{gold_id}"}}.', ref)
    assert (out["parse_path"], out["predicted"], out["scores"]["exact"]) == ("extracted", {"cell_id": gold_id}, 1)
    later = _score(f'First {{"cell_id": "{other}"}}, no wait: {{"cell_id": "{gold_id}"}} final.', ref)
    assert (later["parse_path"], later["predicted"]) == ("extracted", {"cell_id": gold_id})
    nested = _score(f'Result: {{"answer": {{"cell_id": "{gold_id}"}}, "confidence": 0.9}}', ref)
    assert (nested["parse_path"], nested["predicted"]) == ("extracted", {"cell_id": gold_id})


def test_parse_extracted_survives_stray_brace_and_quote_before_answer(table_case):
    """A stray '{' and an odd quote in the prose must not hide a later balanced object."""
    rec, ref, gold_id, _ = table_case
    out = _score(f'The "{{" character is not it; answer {{"cell_id": "{gold_id}"}}', ref)
    assert (out["status"], out["parse_path"], out["first_violation"]) == ("valid", "extracted", "none")


def test_echoed_candidate_row_is_not_an_answer(table_case):
    rec, ref, gold_id, other = table_case
    row = json.dumps({"candidate_id": other, "candidate_type": "cell"})
    after = _score(f'Answer {{"cell_id": "{gold_id}"}}. Matching row: {row}', ref)
    assert (after["parse_path"], after["predicted"], after["first_violation"]) == (
        "extracted", {"cell_id": gold_id}, "none")
    only_row = _score(row, ref)
    assert (only_row["status"], only_row["parse_path"], only_row["reason"]) == (
        "unresolved", "strict", "missing key 'cell_id'")
    in_prose = _score(f"I pick this row: {row}", ref)
    assert (in_prose["status"], in_prose["parse_path"]) == ("unresolved", "failed")
    assert in_prose["violations"] == ["candidate_valid"]


def test_prompt_schema_placeholder_scores_invalid_never_exact(cases):
    """The prompt's schema line uses "<candidate_id>"; echoing it (or the prompt) is invalid."""
    checked = 0
    for fam in ("relational", "hierarchy", "graph", "table"):
        for rec, ref in cases[fam][:8]:
            row = rec.to_row()
            schema = _score(row["output_schema"], ref)
            assert (schema["status"], schema["parse_path"]) == ("invalid", "strict"), rec.id
            assert set(schema["predicted"].values()) == {"<candidate_id>"}
            assert schema["reason"] == "id '<candidate_id>' is not in the candidate inventory"
            echo = _score(row["prompt"], ref)
            assert (echo["status"], echo["parse_path"], echo["scores"]["exact"]) == ("invalid", "extracted", 0)
            assert echo["first_violation"] == "candidate_valid"
            checked += 1
    assert checked == 32


@pytest.mark.parametrize("text", ["", "   ", "I am not sure.", "{cell_id: x", "{}", "```\nnot json\n```",
                                  "cell_r01_c00"])
def test_parse_failed_or_unresolved(table_case, text):
    rec, ref, _, _ = table_case
    out = _score(text, ref)
    assert out["status"] == "unresolved"
    assert out["scores"] == _zero_scores(rec)
    assert out["violations"] == ["candidate_valid"]


@pytest.mark.parametrize("value", [None, 42, ["x"], {"cell_id": "x"}])
def test_non_string_prediction_is_failed(table_case, value):
    rec, ref, _, _ = table_case
    out = score_prediction(value, ref)
    assert (out["status"], out["parse_path"], out["first_violation"]) == ("unresolved", "failed", "candidate_valid")


def test_parse_prediction_paths_directly():
    assert parse_prediction('{"cell_id": "a"}', "table") == ({"cell_id": "a"}, "strict")
    assert parse_prediction('```json\n{"cell_id": "a"}\n```', "table") == ({"cell_id": "a"}, "fenced")
    assert parse_prediction('so {"cell_id": "a"} ok', "table") == ({"cell_id": "a"}, "extracted")
    assert parse_prediction('so {"candidate_id": "a"} ok', "table") == (None, "failed")
    assert parse_prediction('so {"source": "a", "target": "b"} ok', "graph") == (
        {"source": "a", "target": "b"}, "extracted")
    assert parse_prediction('so {"source": "a"} ok', "table") == (None, "failed")
    assert parse_prediction(None, "table") == (None, "failed")


# --------------------------------------------------------------------------- alias table and ids


@pytest.mark.parametrize("key", ["id", "element_id", "node_id", "target_id", "dom_id", "cell_id"])
def test_single_key_aliases(cases, key):
    for fmt in ("svg", "canvas", "tree", "dom", "table"):
        rec, ref = _by_format(cases, fmt)[0]
        gold = _gold(rec)
        (gold_id,) = gold.values()
        out = _score({key: gold_id}, ref)
        assert (out["status"], out["predicted"], out["first_violation"]) == ("valid", gold, "none"), (fmt, key)


@pytest.mark.parametrize("src_key,dst_key", [
    ("source_id", "target_id"), ("source", "target"), ("source_node_id", "target_node_id"), ("source", "target_id"),
])
def test_graph_aliases(cases, src_key, dst_key):
    rec, ref = cases["graph"][0]
    gold = _gold(rec)
    out = _score({src_key: gold["source_id"], dst_key: gold["target_id"]}, ref)
    assert (out["status"], out["predicted"], out["first_violation"]) == ("valid", gold, "none")


def test_candidate_id_is_never_an_alias(cases):
    for fmt in ("svg", "tree", "dom", "table"):
        rec, ref = _by_format(cases, fmt)[0]
        ((key, gold_id),) = _gold(rec).items()
        out = _score({"candidate_id": gold_id}, ref)
        assert (out["status"], out["reason"]) == ("unresolved", f"missing key {key!r}"), fmt
    rec, ref = cases["graph"][0]
    gold = _gold(rec)
    out = _score({"candidate_id": gold["source_id"], "target_id": gold["target_id"]}, ref)
    assert (out["status"], out["reason"]) == ("unresolved", "missing key 'source_id'")


def test_graph_single_id_alias_does_not_apply(cases):
    rec, ref = cases["graph"][0]
    gold = _gold(rec)
    out = _score({"id": gold["source_id"], "target_id": gold["target_id"]}, ref)
    assert (out["status"], out["reason"]) == ("unresolved", "missing key 'source_id'")


def test_duplicate_keys(table_case):
    rec, ref, gold_id, other = table_case
    conflict = _score(f'{{"cell_id": "{gold_id}", "cell_id": "{other}"}}', ref)
    assert (conflict["status"], conflict["parse_path"], conflict["reason"]) == (
        "unresolved", "strict", "conflicting duplicate key 'cell_id'")
    assert conflict["scores"] == _zero_scores(rec)
    same = _score(f'{{"cell_id": "{gold_id}", "cell_id": "{gold_id}"}}', ref)
    assert (same["status"], same["first_violation"]) == ("valid", "none")
    aliases = _score({"id": gold_id, "cell_id": other}, ref)
    assert (aliases["status"], aliases["reason"]) == ("unresolved", "conflicting values for 'cell_id'")
    agree = _score({"id": gold_id, "cell_id": gold_id}, ref)
    assert (agree["status"], agree["predicted"], agree["scores"]["exact"]) == ("valid", {"cell_id": gold_id}, 1)


def test_graph_duplicate_endpoint_keys_conflict(cases):
    rec, ref = cases["graph"][0]
    gold = _gold(rec)
    text = (f'{{"source_id": "{gold["source_id"]}", "source": "{gold["target_id"]}", '
            f'"target_id": "{gold["target_id"]}"}}')
    out = _score(text, ref)
    assert (out["status"], out["reason"]) == ("unresolved", "conflicting values for 'source_id'")


@pytest.mark.parametrize("value", [3, 1.5, None, True, ["cell_r01_c00"], {"id": "cell_r01_c00"}, "", "   "])
def test_non_string_or_empty_value_is_unresolved(table_case, value):
    rec, ref, _, _ = table_case
    out = _score({"cell_id": value}, ref)
    assert out["status"] == "unresolved"
    assert out["parse_path"] == "strict"
    assert out["reason"] == "'cell_id' must be a non-empty string id"
    assert out["scores"] == _zero_scores(rec)
    assert out["violations"] == ["candidate_valid"]


def test_ids_whitespace_stripped_and_case_sensitive(table_case):
    rec, ref, gold_id, _ = table_case
    padded = _score({"cell_id": f"  {gold_id}\t\n"}, ref)
    assert (padded["status"], padded["predicted"], padded["first_violation"]) == (
        "valid", {"cell_id": gold_id}, "none")
    upper = _score({"cell_id": gold_id.upper()}, ref)
    assert (upper["status"], upper["predicted"]) == ("invalid", {"cell_id": gold_id.upper()})
    assert upper["reason"] == f"id {gold_id.upper()!r} is not in the candidate inventory"


def test_unknown_extra_keys_are_ignored(table_case):
    rec, ref, gold_id, _ = table_case
    out = _score({"cell_id": gold_id, "confidence": 0.9, "reason": "row 3"}, ref)
    assert (out["status"], out["first_violation"]) == ("valid", "none")


# --------------------------------------------------------------------------- hierarchy and relational


def _hierarchy_decoys(rec):
    t = rec.case.target
    canonical = [c for c in rec.case.candidates if c.meaning.canonical]
    same_slot = [c for c in canonical if c.meaning.group != t.group and c.meaning.path == t.path
                 and c.meaning.role == t.role and c.meaning.kind == t.kind]
    other_role = [c for c in canonical if c.meaning.group == t.group and c.meaning.path == t.path
                  and c.meaning.kind == "port" and c.meaning.role != t.role]
    return same_slot, other_role


def test_hierarchy_same_slot_other_module_violates_identity_only(cases):
    checked = 0
    for rec, ref in cases["hierarchy"]:
        same_slot, _ = _hierarchy_decoys(rec)
        assert same_slot, rec.id  # docs/specification.md §7 degeneracy gate: a same-slot decoy exists
        for decoy in same_slot:
            (key,) = _gold(rec)
            out = _score({key: decoy.candidate_id}, ref)
            assert out["scores"] == _valid_scores(rec, identity=0, exact=0), (rec.id, decoy.candidate_id)
            assert out["violations"] == ["identity"]
            assert out["first_violation"] == "identity"
            assert out["possible_first_violations"] == ["identity"]
            checked += 1
    assert checked == 195  # 195 cases, two modules each: one same-slot decoy per case


def test_hierarchy_same_group_other_role_port_is_role(cases):
    kinds = {"port": 0, "block": 0}
    for rec, ref in cases["hierarchy"]:
        _, other_role = _hierarchy_decoys(rec)
        assert other_role, rec.id
        (key,) = _gold(rec)
        t = rec.case.target
        for decoy in other_role:
            out = _score({key: decoy.candidate_id}, ref)
            if t.kind == "port":  # the input port instead of the output port of the same block
                assert out["scores"] == _valid_scores(rec, role=0, exact=0), rec.id
                assert out["violations"] == ["role"]
            else:  # a port of the instructed block: role and node kind both fail, role first
                assert out["scores"] == _valid_scores(rec, role=0, attribute=0, exact=0), rec.id
                assert out["violations"] == ["role", "attribute"]
            assert out["first_violation"] == "role"
            kinds[t.kind] += 1
    assert kinds == {"port": 180, "block": 30}


def test_hierarchy_block_param_child_is_attribute_only(cases):
    """Broad block targets: the block's role-less param child (same group, path, role None,
    kind "param") violates only the node-kind stage, so ``attribute`` comes first (docs/specification.md §4)."""
    checked = []
    for rec, ref in cases["hierarchy"]:
        t = rec.case.target
        if t.kind != "block":
            continue
        assert rec.id.startswith("broad_"), rec.id  # block targets exist on the broad suite only
        param = rec.case.candidate_by_semantic_id(f"{t.semantic_id}.param")
        assert (param.meaning.group, param.meaning.path, param.meaning.role, param.meaning.kind) == (
            t.group, t.path, None, "param")
        (key,) = _gold(rec)
        out = _score({key: param.candidate_id}, ref)
        assert out["status"] == "valid"
        assert out["scores"] == _valid_scores(rec, attribute=0, exact=0), rec.id
        assert out["violations"] == ["attribute"]
        assert out["first_violation"] == "attribute"
        assert out["possible_first_violations"] == ["attribute"]
        assert out["predicted_latent"] == {"entity": param.meaning.entity, "semantic_id": param.meaning.semantic_id}
        checked.append(rec.case.format)
    assert len(checked) == 15 and set(checked) == {"tree", "dom"}


def test_hierarchy_module_root_is_hierarchy(cases):
    rec, ref = cases["hierarchy"][0]
    (key,) = _gold(rec)
    root = next(c for c in rec.case.candidates
                if c.meaning.group == rec.case.target.group and c.meaning.kind == "module")
    out = _score({key: root.candidate_id}, ref)
    assert out["violations"][0] == "hierarchy"
    assert out["first_violation"] == "hierarchy"
    assert out["scores"]["identity"] == 1 and out["scores"]["hierarchy"] == 0


def test_svg_child_part_of_gold_group_fails_only_exact(cases):
    checked = 0
    for rec, ref in _by_format(cases, "svg"):
        t = rec.case.target
        parts = [c for c in rec.case.candidates if c.meaning.entity == t.entity and not c.meaning.canonical]
        for part in parts:
            out = _score({"target_id": part.candidate_id}, ref)
            assert out["status"] == "valid"
            assert out["scores"] == {"candidate_valid": 1, "identity": 1, "attribute": 1, "anchor": 1,
                                     "relation": 1, "exact": 0}, (rec.id, part.candidate_id)
            assert out["violations"] == []
            assert out["first_violation"] == "exact"
            assert out["possible_first_violations"] == ["exact"]
            assert out["predicted_latent"] == {"entity": t.entity, "semantic_id": part.meaning.semantic_id}
            checked += 1
    assert checked == 24  # 12 svg cases whose target is a two-part group


def test_relational_anchor_collapse_is_identity_first(cases):
    for rec, ref in cases["relational"]:
        t = rec.case.target
        anchor = next(c for c in rec.case.candidates if c.meaning.entity == t.anchor and c.meaning.canonical)
        out = _score({"target_id": anchor.candidate_id}, ref)
        attribute_ok = all(dict(anchor.meaning.attributes).get(k) == v for k, v in t.attributes)
        expected = ["identity"] + ([] if attribute_ok else ["attribute"]) + ["anchor", "relation"]
        assert out["violations"] == expected, rec.id
        assert out["first_violation"] == "identity"
        assert out["scores"]["anchor"] == 0 and out["scores"]["relation"] == 0
        assert out["possible_first_violations"] == expected
    assert len(cases["relational"]) == 75


def test_relational_anchor_example_exact_vector(cases):
    """broad_relational_0000: 'the green square in the same column above the blue square'; pick the anchor."""
    rec, ref = _by_format(cases, "svg")[0]
    assert rec.case.instruction == "Select the green square in the same column above the blue square."
    anchor = next(c for c in rec.case.candidates if c.meaning.entity == rec.case.target.anchor and c.meaning.canonical)
    out = _score({"target_id": anchor.candidate_id}, ref)
    assert out["scores"] == {"candidate_valid": 1, "identity": 0, "attribute": 0, "anchor": 0, "relation": 0,
                             "exact": 0}
    assert out["violations"] == ["identity", "attribute", "anchor", "relation"]
    assert out["first_violation"] == "identity"


@pytest.mark.parametrize("relation,position,anchor,expected", [
    ("above", (1, 0), (1, 2), True), ("above", (1, 3), (1, 2), False), ("above", (0, 0), (1, 2), False),
    ("below", (1, 3), (1, 2), True), ("left_of", (0, 2), (1, 2), True), ("left_of", (0, 1), (1, 2), False),
    ("right_of", (2, 2), (1, 2), True), ("above", (1, 2), (1, 2), False), ("near", (1, 0), (1, 2), False),
    ("above", None, (1, 2), False),
])
def test_relation_predicate(relation, position, anchor, expected):
    assert relation_holds(relation, position, anchor) is expected


# --------------------------------------------------------------------------- never-first labels


def _every_prediction(rec):
    """Every admissible surface reference of a case (graph: ordered pairs of distinct nodes)."""
    ids = [c.candidate_id for c in rec.case.candidates]
    keys = list(_gold(rec))
    if rec.case.family == "graph":
        return [{keys[0]: s, keys[1]: t} for s, t in itertools.permutations(ids, 2)]
    return [{keys[0]: i} for i in ids]


@pytest.mark.parametrize("family", ["relational", "hierarchy", "graph", "table"])
def test_never_first_labels_under_declared_order(cases, family):
    """docs/specification.md §4 / paper Table 15: some labels never come first; they live in the violation sets."""
    pool = cases[family][:ENUMERATED_CASES_PER_FAMILY]
    assert len(pool) == ENUMERATED_CASES_PER_FAMILY
    firsts, in_sets = set(), set()
    for rec, ref in pool:
        exact = 0
        for pred in _every_prediction(rec):
            out = _score(pred, ref)
            assert out["status"] == "valid"
            firsts.add(out["first_violation"])
            in_sets.update(out["violations"])
            if out["violations"]:
                assert out["possible_first_violations"] == out["violations"]
                assert out["first_violation"] == out["violations"][0]
            else:
                assert out["possible_first_violations"] == [out["first_violation"]]
                assert out["first_violation"] in ("exact", "none")
            exact += out["scores"]["exact"]
        assert exact == 1, rec.id  # unique gold over the whole inventory
    for label in NEVER_FIRST.get(family, ()):
        assert label not in firsts, (family, label)
        assert label in in_sets, (family, label)
    order = DECLARED_ORDERS[family]
    assert firsts <= set(order[1:]) | {"none"}
    expected_firsts = {
        "relational": {"identity", "exact", "none"},
        "hierarchy": {"identity", "hierarchy", "role", "attribute", "none"},
        "graph": {"identity", "role", "none"},
        "table": {"table_row", "table_column", "none"},
    }[family]
    assert expected_firsts <= firsts


# --------------------------------------------------------------------------- invalid / unresolved records


@pytest.mark.parametrize("family", ["relational", "hierarchy", "graph", "table"])
def test_invalid_and_unresolved_records_zero_every_dimension(cases, family):
    rec, ref = cases[family][0]
    keys = list(_gold(rec))
    invalid = _score({k: "nope_0000" for k in keys}, ref)
    unresolved = _score("I cannot tell.", ref)
    for out, status in ((invalid, "invalid"), (unresolved, "unresolved")):
        assert out["status"] == status
        assert out["scores"] == _zero_scores(rec)
        assert list(out["scores"]) == list(DECLARED_ORDERS[family])
        assert out["violations"] == ["candidate_valid"]
        assert out["first_violation"] == "candidate_valid"
        assert out["possible_first_violations"] == ["candidate_valid"]
        assert out["predicted_latent"] is None
        assert isinstance(out["reason"], str) and out["reason"]
    json.dumps(invalid, allow_nan=False)


# --------------------------------------------------------------------------- reference errors


def test_reference_errors_name_the_field(cases):
    _, ref = cases["table"][0]
    payload = json.loads(ref)
    with pytest.raises(ReferenceError, match="^references: not JSON"):
        load_reference("not json at all")
    with pytest.raises(ReferenceError, match="`schema`.*exbind.reference.v0"):
        load_reference(json.dumps({**payload, "schema": "exbind.reference.v0"}))
    with pytest.raises(ReferenceError, match="`schema`"):
        load_reference(json.dumps({"case_id": "x"}))
    missing = {k: v for k, v in payload.items() if k != "candidates"}
    with pytest.raises(ReferenceError, match="`candidates` is missing"):
        load_reference(json.dumps(missing))
    with pytest.raises(ReferenceError, match="^references:"):
        load_reference(payload)  # a dict, not the JSON string
    with pytest.raises(ReferenceError):
        score_prediction('{"cell_id": "cell_r01_c00"}', "[]")
    assert payload["schema"] == REFERENCE_SCHEMA
