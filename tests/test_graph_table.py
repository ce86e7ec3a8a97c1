"""Graph and table families with their surfaces (docs/specification.md §3, §6, §7, §11; paper §3, §6.4, A.2)."""

from __future__ import annotations

import itertools
import json
import random
import re
from collections import Counter

import pytest

from exbind_scoring import tokenize
from generator.compilers.graph import compile_graph
from generator.compilers.table import compile_table
from generator.families import graph as graph_family
from generator.families import table as table_family
from generator.families.table import matching_rows
from generator.gates import gate_degeneracy
from generator.records import ExBindRecord

TABLE_CONDITIONS = ("compact", "conjunctive", "high_candidate", None)


def _table_case(seed: int, condition, slot: int, latent_id: str = "t_case"):
    rng = random.Random(seed)
    latent = table_family.sample(rng, latent_id, condition, slot)
    return latent, compile_table(latent, rng)


def _degeneracy(case, latent):
    """The shared degeneracy gate (each conjunct alone non-unique) on a compiled case."""
    rec = ExBindRecord(case=case, latent_id=latent.latent_id, suite="targeted", condition=latent.shape)
    return gate_degeneracy(rec, rec.reference_json(), "targeted")


def _graph_case(seed: int, slot: int, latent_id: str = "g_case"):
    rng = random.Random(seed)
    latent = graph_family.sample(rng, latent_id, None, slot)
    return latent, compile_graph(latent, rng)


# --- executors (the lead's unique-gold rules, run against the candidates' Meanings) ---


def execute_table(case) -> list[str]:
    """Candidate ids in the target column of every row satisfying all stated conditions."""
    values = {(c.meaning.row, c.meaning.column): dict(c.meaning.attributes)["value"] for c in case.candidates}
    rows = sorted({r for r, _ in values})
    hits = [r for r in rows if all(values.get((r, col)) == val for col, val in case.target.conditions)]
    return [c.candidate_id for c in case.candidates if c.meaning.row in hits and c.meaning.column == case.target.column]


def execute_graph(case) -> list[tuple[str, str]]:
    """Ordered candidate pairs (s, t) with the instructed names and an instructed-label edge s -> t."""
    names = dict(case.target.attributes)
    edges = set(case.target.edges)
    out = []
    for s, t in itertools.permutations(case.candidates, 2):
        if (
            dict(s.meaning.attributes)["name"] == names["source_name"]
            and dict(t.meaning.attributes)["name"] == names["target_name"]
            and (s.meaning.entity, t.meaning.entity, case.target.edge_label) in edges
        ):
            out.append((s.candidate_id, t.candidate_id))
    return out


def lexical_scores(case) -> dict[str, int]:
    words = tokenize(case.instruction)
    return {c.candidate_id: len(words & tokenize(c.text)) for c in case.candidates}


def lexical_unique_top(case):
    """The lexical-only baseline's choice: the unique max-overlap candidate, else None (tie)."""
    scores = lexical_scores(case)
    best = max(scores.values())
    top = [cid for cid, s in scores.items() if s == best]
    return top[0] if len(top) == 1 else None


def id_counts(case) -> Counter:
    return Counter({c.candidate_id: case.source.count(c.candidate_id) for c in case.candidates})


def gold_rank(case, candidate_id: str) -> int:
    return [c.candidate_id for c in case.candidates].index(candidate_id) + 1


# --- data hygiene: the vocabulary properties the lexical gate relies on ---


def test_table_vocabularies_are_token_disjoint_from_instructions_and_other_columns():
    data = table_family.load_data()
    template_words = set()
    for phr in data["instructions"]:
        assert sorted(phr) == ["condition", "join", "text", "text_row_name"]
        for part in phr.values():
            template_words |= tokenize(re.sub(r"\{[a-z]+\}", " ", part))
    assert len(data["instructions"]) == 6
    assert len(data["templates"]) == 5
    for tpl in data["templates"]:
        schema_words = template_words | tokenize(tpl["entity"]) | set().union(*(tokenize(c) for c in tpl["columns"]))
        column_tokens = {c: set().union(*(tokenize(v) for v in tpl["values"][c])) for c in tpl["columns"]}
        for c in tpl["columns"]:
            assert not column_tokens[c] & schema_words, (tpl["name"], c, column_tokens[c] & schema_words)
            vals = tpl["values"][c]
            assert len(set(vals)) == len(vals)
            for a, b in itertools.permutations(vals, 2):
                assert not tokenize(a) <= tokenize(b), (a, b)  # no value's tokens inside another's
        for a, b in itertools.combinations(tpl["columns"], 2):
            assert not column_tokens[a] & column_tokens[b], (tpl["name"], a, b)
        assert len(tpl["values"][tpl["columns"][0]]) >= 16  # distinct row names for 16 rows
        assert tpl["columns"][0] == tpl["entity"]  # the row-name column's header is the entity noun
        assert len(tpl["columns"]) == 5
        assert all(4 <= len(tpl["values"][c]) < 10 for c in tpl["columns"][1:])  # distinct at 3 rows, duplicates at 10+
    assert data["shapes"] == {
        "compact": {"rows": [3, 3], "columns": [4, 4], "conditions": 1, "max_gold_rank": 12},
        "conjunctive": {"rows": [3, 3], "columns": [5, 5], "conditions": 2, "max_gold_rank": 12},
        "high_candidate": {"rows": [10, 16], "columns": [5, 5], "conditions": 1, "max_gold_rank": None},
    }


def test_graph_vocabulary_names_share_no_token_with_labels_or_templates():
    data = graph_family.load_data()
    pools = data["instructions"]
    assert sorted(pools) == ["source_first", "target_first"]
    templates = pools["source_first"] + pools["target_first"]
    words = set().union(*(tokenize(re.sub(r"\{[a-z]+\}", " ", t)) for t in templates))
    words |= set().union(*(tokenize(label) for label in data["edge_labels"]))
    names = data["node_names"]
    assert len(pools["source_first"]) == len(pools["target_first"]) == 6 and len(names) == len(set(names)) == 23
    assert all(len(tokenize(n)) == 1 and not tokenize(n) & words for n in names)
    assert data["target_first_every"] == 2
    # every template names each placeholder once; the pool fixes which node is mentioned first
    for key, first, second in (("source_first", "{source}", "{target}"), ("target_first", "{target}", "{source}")):
        for t in pools[key]:
            assert t.count("{source}") == t.count("{target}") == t.count("{label}") == 1, t
            assert t.index(first) < t.index(second), (key, t)
            assert "source" in tokenize(t), t  # every template asks for the source explicitly


# --- exact values for fixed seeds ---


def test_table_compact_fixed_seed_exact_values():
    latent, case = _table_case(7, "compact", 8, "hard_table_compact_0008")
    assert latent.template == "employees" and latent.shape == "compact"
    assert latent.columns == ("employee", "department", "office", "level")
    assert case.instruction == "Find the cell holding the department of the employee whose level is principal."
    assert case.gold() == {"cell_id": "cell_r01_c01"}
    assert len(case.candidates) == 12 and gold_rank(case, "cell_r01_c01") == 5
    assert case.target.semantic_id == "hard_table_compact_0008_row_1.department"
    assert case.target.entity == "hard_table_compact_0008_row_1"
    assert case.target.conditions == (("level", "principal"),)
    assert case.source.splitlines()[1] == (
        "<thead><tr><th>employee</th><th>department</th><th>office</th><th>level</th></tr></thead>")
    assert '<td id="cell_r01_c03">principal</td>' in case.source
    # the lexical decoy: the condition cell of the gold row, i.e. correct row, wrong column
    assert lexical_unique_top(case) == "cell_r01_c03"
    gold = case.candidate_by_semantic_id(case.target.semantic_id)
    assert gold.text == "finance" and gold.candidate_type == "cell"
    assert gold.meaning.row == 1 and gold.meaning.column == "department"
    assert gold.meaning.attributes == (("value", "finance"),)
    assert latent.rows == (("Sven", "finance", "Madrid", "principal"), ("Dmitri", "support", "Berlin", "junior"),
                           ("Lars", "research", "Boston", "associate"))  # no value twice in a column


def test_table_row_name_target_fixed_seed_exact_values():
    """Slot 3 targets the row-name column; its phrasing names no column header."""
    latent, case = _table_case(7, "compact", 3, "hard_table_compact_0003")
    assert latent.targets_row_name and latent.target_column == "employee"
    assert case.instruction == "Return the name entry of the employee for which the shift is rotating."
    assert case.gold() == {"cell_id": "cell_r01_c00"} and case.candidate_by_semantic_id(case.target.semantic_id).text == "Sven"
    assert lexical_unique_top(case) == "cell_r01_c03"


def test_table_conjunctive_and_high_candidate_fixed_seed_exact_values():
    latent, case = _table_case(7, "conjunctive", 3)
    assert case.instruction == (
        "Return the name entry of the employee for which the shift is rotating and the level is junior.")
    assert case.gold() == {"cell_id": "cell_r03_c00"} and len(case.candidates) == 15
    assert gold_rank(case, "cell_r03_c00") == 7
    assert matching_rows(latent, (("shift", "rotating"),)) == [2, 3]
    assert matching_rows(latent, (("level", "junior"),)) == [1, 3]
    assert _degeneracy(case, latent) == (True, "")

    latent, case = _table_case(7, "high_candidate", 8)
    assert case.instruction == "Find the cell holding the department of the employee whose level is junior."
    assert case.gold() == {"cell_id": "cell_r09_c01"} and gold_rank(case, "cell_r09_c01") == 25
    assert len(case.candidates) == 60 and len(latent.rows) == 12
    assert [row[1] for row in latent.rows].count("sales") == 3  # the gold value "sales" is duplicated
    assert matching_rows(latent, latent.conditions) == [9]


def test_graph_fixed_seed_exact_values():
    latent, case = _graph_case(3, 0, "g_0001")
    assert case.instruction == (
        "Pick the source node and the target node of the relation: the archiver depends on the notifier."
    )
    assert case.gold() == {"source_id": "g_b8f0", "target_id": "g_9a0d"}
    assert len(case.candidates) == 7 and len(latent.edges) == 14
    assert case.source.splitlines()[0] == 'node g_a0c4 "queue"'
    assert "g_b8f0 -> g_9a0d [depends on]" in case.source
    assert "g_9a0d -> g_b8f0 [subscribes to]" in case.source  # the reversed-edge decoy
    assert case.target.source == "g_0001_node6" and case.target.target == "g_0001_node3"
    assert case.target.attributes == (("source_name", "archiver"), ("target_name", "notifier"))
    assert all(c.roles == ["source", "target"] and c.candidate_type == "graph_node" for c in case.candidates)
    assert latent.degrees() == [4] * 7


def test_graph_target_first_fixed_seed_exact_values():
    """Slot 1 (odd): same RNG draws as slot 0, so the same graph and ids, but the target is named first."""
    latent, case = _graph_case(3, 1, "g_0001")
    base, base_case = _graph_case(3, 0, "g_0001")
    assert latent.target_first is True and base.target_first is False
    assert latent.canonical() == base.canonical()  # phrasing hint is not latent content
    assert case.instruction == (
        "Give the source and target of the edge that points to the notifier from the archiver"
        " and is labelled 'depends on'."
    )
    assert case.gold() == base_case.gold() == {"source_id": "g_b8f0", "target_id": "g_9a0d"}
    assert case.source == base_case.source and case.target == base_case.target
    assert case.instruction.index("notifier") < case.instruction.index("archiver")


def test_graph_mention_order_balanced_and_lexical_first_mention_fails_on_target_first():
    """Broad graph cases: half name the target first; there the first-mention lexical
    baseline returns the reversed pair (valid, identity and relation pass, role fails)."""
    from exbind_scoring import score_prediction
    from generator.baselines import lexical_only
    from composition.release import broad_plans, generate_latent

    plans = [p for p in broad_plans() if p.family == "graph"]
    assert len(plans) == 50
    vectors = Counter()
    for plan in plans:
        gen = generate_latent(plan)
        (rec,), (ref,) = gen.records, gen.references
        names = dict(rec.case.target.attributes)
        instr = rec.case.instruction
        target_first = instr.index(names["target_name"]) < instr.index(names["source_name"])
        assert target_first == (plan.slot % 2 == 1)
        scores = score_prediction(lexical_only(instr, ref), ref)["scores"]
        vectors[(target_first, tuple(scores.items()))] += 1
    keys = ("candidate_valid", "identity", "relation", "role", "exact")
    assert vectors == {
        (False, tuple(zip(keys, (1, 1, 1, 1, 1)))): 25,
        (True, tuple(zip(keys, (1, 1, 1, 0, 0)))): 25,
    }


def test_determinism_same_seed_same_case():
    for make in (lambda: _table_case(11, "high_candidate", 5), lambda: _graph_case(11, 5)):
        (la, a), (lb, b) = make(), make()
        assert la == lb
        assert (a.instruction, a.source, a.target) == (b.instruction, b.source, b.target)
        assert [c.candidate_id for c in a.candidates] == [c.candidate_id for c in b.candidates]
        assert [c.meaning for c in a.candidates] == [c.meaning for c in b.candidates]


def test_canonical_is_json_and_free_of_ids():
    latent, case = _table_case(5, "conjunctive", 2, "t_zz99")
    text = json.dumps(latent.canonical(), sort_keys=True)
    assert "t_zz99" not in text and "cell_r" not in text
    glatent, gcase = _graph_case(5, 2, "g_zz99")
    gtext = json.dumps(glatent.canonical(), sort_keys=True)
    assert "g_zz99" not in gtext and not any(c.candidate_id in gtext for c in gcase.candidates)


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        graph_family.sample(random.Random(0), "g", "compact", 0)
    with pytest.raises(ValueError):
        table_family.sample(random.Random(0), "t", "depth_2", 0)
    with pytest.raises(ValueError):
        table_family.sample(random.Random(0), "t", None, -1)


# --- invariant loops ---


def _common_checks(case):
    ids = [c.candidate_id for c in case.candidates]
    sems = [c.meaning.semantic_id for c in case.candidates]
    assert len(set(ids)) == len(ids) and len(set(sems)) == len(sems)
    for gid in case.gold().values():
        assert gid not in case.instruction
    assert all(cid not in case.instruction for cid in ids)
    assert len(set(id_counts(case).values())) == 1  # every id occurs equally often
    types = Counter(c.candidate_type for c in case.candidates)
    assert len(types) == 1 and min(types.values()) > 1  # type-only never solves


@pytest.mark.parametrize("condition", TABLE_CONDITIONS)
def test_table_invariants_over_seeds(condition):
    ranks = Counter()
    row_name_targets = 0
    for seed in range(300):
        slot = seed % 40
        latent, case = _table_case(1000 + seed, condition, slot, f"t_{seed:04d}")
        _common_checks(case)
        (gold_id,) = case.gold().values()
        assert execute_table(case) == [gold_id]
        assert all(case.source.count(f'id="{c.candidate_id}"') == 1 for c in case.candidates)
        assert len(case.candidates) == len(latent.rows) * len(latent.columns)
        # lexical-only never solves: the gold cell shares no token with the instruction
        gold = case.candidate_by_semantic_id(case.target.semantic_id)
        assert not tokenize(gold.text) & tokenize(case.instruction)
        top = lexical_unique_top(case)
        assert top != gold_id
        if len(latent.conditions) == 1:  # the decoy: correct row, wrong (condition) column
            decoy = next(c for c in case.candidates if c.candidate_id == top)
            assert decoy.meaning.row == latent.target_row and decoy.meaning.column == latent.conditions[0][0]
        assert _degeneracy(case, latent) == (True, "")
        assert [c.candidate_id for c in case.candidates] != sorted(c.candidate_id for c in case.candidates)
        ranks[gold_rank(case, gold_id)] += 1
        n_rows, n_cols = len(latent.rows), len(latent.columns)
        shape = condition or ("compact" if slot % 2 == 0 else "conjunctive")
        assert latent.shape == shape
        cond_columns = {col for col, _ in latent.conditions}
        assert latent.columns[0] not in cond_columns and latent.target_column not in cond_columns
        assert n_cols - len(cond_columns) >= 3  # the target row keeps 3+ cells outside the conditions
        row_name_targets += latent.targets_row_name
        attribute_columns = range(1, n_cols)
        if shape == "compact":
            assert (n_rows, n_cols, len(latent.conditions)) == (3, 4, 1)
            for c in range(n_cols):  # no duplicate value anywhere
                assert len({row[c] for row in latent.rows}) == n_rows
        elif shape == "conjunctive":
            assert (n_rows, n_cols, len(latent.conditions)) == (3, 5, 2)
            for c in attribute_columns:  # only the condition values repeat, each on exactly 2 rows
                values = [row[c] for row in latent.rows]
                if latent.columns[c] in cond_columns:
                    value = dict(latent.conditions)[latent.columns[c]]
                    assert values.count(value) == 2 and len(set(values)) == 2
                else:
                    assert len(set(values)) == n_rows
        else:
            assert 10 <= n_rows <= 16 and n_cols == 5 and len(latent.conditions) == 1
            for c in attribute_columns:  # duplicate values in every attribute column
                assert len({row[c] for row in latent.rows}) < n_rows
            (col, val), = latent.conditions
            assert [row[latent.columns.index(col)] for row in latent.rows].count(val) == 1
            if not latent.targets_row_name:
                column = [row[latent.columns.index(latent.target_column)] for row in latent.rows]
                assert column.count(column[latent.target_row - 1]) >= 2  # the gold value repeats
        if shape != "high_candidate":
            assert len(case.candidates) <= 15 and gold_rank(case, gold_id) <= 12
    assert len(ranks) >= 12 and max(ranks.values()) < 60
    assert row_name_targets == 75  # slots 0-4 and 25-29 of every 40
    if condition == "high_candidate":
        assert sum(n for r, n in ranks.items() if r >= 13) > 200


@pytest.mark.parametrize("condition", TABLE_CONDITIONS)
def test_table_balance_per_condition(condition):
    n = 50 if condition is None else 40
    latents = [table_family.sample(random.Random(500 + slot), f"t{slot}", condition, slot) for slot in range(n)]
    templates = Counter(lat.template for lat in latents)
    assert set(templates.values()) == {n // 5} and len(templates) == 5
    for name in templates:
        cols = Counter(lat.target_column for lat in latents if lat.template == name)
        assert len(cols) == 5 and max(cols.values()) - min(cols.values()) <= 1  # row-name column included
    assert sum(lat.targets_row_name for lat in latents) == 10
    phrasings = Counter(lat.phrasing for lat in latents)
    assert len(phrasings) == 6 and max(phrasings.values()) - min(phrasings.values()) <= 1
    strata = Counter(lat.rank_stratum for lat in latents)
    shapes = Counter(lat.shape for lat in latents)
    if condition is None:
        assert shapes == {"compact": 25, "conjunctive": 25}
        for shape in ("compact", "conjunctive"):  # every shape sees every phrasing
            assert len({lat.phrasing for lat in latents if lat.shape == shape}) == 6
            assert len({lat.rank_stratum for lat in latents if lat.shape == shape}) == 25
    else:
        assert strata == Counter(range(40))  # every gold-position stratum once


def test_high_candidate_gold_ranks_reach_13_and_beyond():
    ranks = []
    for slot in range(40):
        _, case = _table_case(20260824 + slot, "high_candidate", slot)
        ranks.append(gold_rank(case, case.gold()["cell_id"]))
    assert sum(r >= 13 for r in ranks) == 32 and len(set(ranks)) == 32


def test_graph_invariants_over_seeds():
    n_reverse = n_target_first = 0
    for seed in range(300):
        latent, case = _graph_case(2000 + seed, seed, f"gl_{seed:04d}")
        _common_checks(case)
        gold = case.gold()
        assert execute_graph(case) == [(gold["source_id"], gold["target_id"])]
        names = [c.text for c in case.candidates]
        assert 6 <= len(names) <= 9 and len(set(names)) == len(names)
        lines = case.source.splitlines()
        node_lines = [ln for ln in lines if ln.startswith("node ")]
        assert len(node_lines) == len(case.candidates)
        for c in case.candidates:
            assert sum(c.candidate_id in ln for ln in node_lines) == 1
            assert f'node {c.candidate_id} "{c.text}"' in node_lines
        assert len(lines) == len(case.candidates) + len(latent.edges)
        assert set(latent.degrees()) == {4}
        pairs = [(s, t) for s, t, _ in latent.edges]
        assert len(set(pairs)) == len(pairs) and all(s != t for s, t in pairs)
        # decoys: reversed edge (different label) in 4 of 5 slots; a same-label edge nearby
        assert latent.has_reverse == (seed % 5 != 4)
        n_reverse += latent.has_reverse
        assert latent.target_first == (seed % 2 == 1)
        src, dst = latent.names[latent.source], latent.names[latent.target]
        assert (case.instruction.index(dst) < case.instruction.index(src)) == latent.target_first
        n_target_first += latent.target_first
        if latent.has_reverse:
            rev = next(lab for s, t, lab in latent.edges if (s, t) == (latent.target, latent.source))
            assert rev != latent.label
        ends = {latent.source, latent.target}
        assert any(
            lab == latent.label and {s, t} & ends and {s, t} != ends for s, t, lab in latent.edges
        )
    assert n_reverse == 240
    assert n_target_first == 150
