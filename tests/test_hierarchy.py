"""Hierarchy family and its tree / DOM compilers (docs/specification.md §3-4, §6-7; paper §3-4)."""

from __future__ import annotations

import json
import random
import re

import pytest

from exbind_scoring import execute_target, load_reference, tokenize
from generator.gates import gate_degeneracy
from generator.records import ExBindRecord
from generator.compilers.dom import compile_dom
from generator.compilers.tree import compile_tree
from generator.families import hierarchy as h

CONDITIONS = (None, "depth_2", "depth_3", "depth_4")


def _fixed_latent():
    # slot 3 of depth_3: 38 candidates (hierarchy.json targeted_candidate_counts)
    return h.sample(random.Random(20260824), "hier_t_0003", "depth_3", 3)


def _lexical_solves(case) -> bool:
    """Lexical-only baseline: solves only when gold is the unique top overlap (ties never solve)."""
    words = tokenize(case.instruction)
    scores = {c.candidate_id: len(words & tokenize(c.text)) for c in case.candidates}
    top = max(scores.values())
    winners = [cid for cid, s in scores.items() if s == top]
    (gold,) = case.gold().values()
    return winners == [gold]


def _type_only_solves(case) -> bool:
    (gold,) = case.gold().values()
    gold_type = next(c.candidate_type for c in case.candidates if c.candidate_id == gold)
    return sum(c.candidate_type == gold_type for c in case.candidates) == 1


# ---------------------------------------------------------------- fixed-seed values


def test_fixed_seed_latent():
    lat = _fixed_latent()
    assert lat.levels == ("module", "stage", "block")
    assert lat.module_names == ("Module Falcon", "Module Atlas")
    assert lat.block_paths == ((1, 1), (1, 2), (1, 3), (2, 1))
    assert lat.block_names == ("encoder", "filter", "tracker", "scaler")
    assert (lat.target_module, lat.target_path, lat.target_kind, lat.target_role) == (2, (1, 3), "port", "output")
    assert lat.target_semantic_id() == "hier_t_0003_m2.s1.b3.out"
    assert h.instruction(lat) == "In Module Atlas, pick the output port of the third block of stage 1."
    assert len(h.nodes(lat)) == 38 == 2 * h.nodes_per_module(lat.block_paths)
    assert h.targeted_candidate_count("depth_3", 3) == 38
    assert lat.skeleton() == (("module", "stage", "block"), 2, ((1, 1), (1, 2), (1, 3), (2, 1)))


def test_fixed_seed_tree():
    case = compile_tree(_fixed_latent(), random.Random(11))
    assert (case.format, case.source_type) == ("tree", "tree_outline")
    assert case.gold() == {"target_id": "n_f2d1"}
    assert len(case.candidates) == 38
    assert [c.candidate_id for c in case.candidates[:3]] == ["n_8660", "n_1fcc", "n_bbe4"]
    assert case.source.splitlines()[:6] == [
        '[n_eee6] module "Module Falcon"',
        "  [n_5f53] stage",
        '    [n_e942] block "encoder"',
        "      [n_1ce5] port input",
        "      [n_0211] port output",
        '      [n_670e] param "codec"',
    ]
    gold = case.candidate_by_semantic_id("hier_t_0003_m2.s1.b3.out")
    assert gold.text == "port output" and gold.candidate_type == "tree_node"
    assert gold.meaning.group == "hier_t_0003_m2" and gold.meaning.path == (1, 3)
    assert "[n_f2d1] port output" in case.source
    module = case.candidate_by_semantic_id("hier_t_0003_m2")
    assert module.text == 'module "Module Atlas"'
    assert module.meaning.attributes == (("name", "Module Atlas"),) and module.meaning.path == ()
    block = case.candidate_by_semantic_id("hier_t_0003_m2.s2.b1")
    assert block.text == 'block "scaler"' and block.meaning.role is None and block.meaning.kind == "block"
    param = case.candidate_by_semantic_id("hier_t_0003_m2.s2.b1.param")
    assert param.text == 'param "factor"' and param.candidate_type == "tree_node"
    assert (param.meaning.group, param.meaning.path, param.meaning.role, param.meaning.kind) == (
        "hier_t_0003_m2", (2, 1), None, "param")
    assert param.meaning.attributes == (("name", "factor"),)
    assert f"[{param.candidate_id}] param \"factor\"" in case.source
    stage = case.candidate_by_semantic_id("hier_t_0003_m2.s2")
    assert stage.text == "stage" and stage.meaning.path == (2,) and stage.meaning.attributes == ()


def test_fixed_seed_dom():
    case = compile_dom(_fixed_latent(), random.Random(12))
    assert (case.format, case.source_type) == ("dom", "html_dom")
    assert case.gold() == {"dom_id": "d_8000"}
    assert '<span id="d_8000" class="port" data-role="output">out</span>' in case.source
    texts = {c.meaning.kind: set() for c in case.candidates}
    for c in case.candidates:
        texts[c.meaning.kind].add(c.text)
    assert texts == {
        "module": {"Module Falcon", "Module Atlas"},
        "stage": {""},
        "block": {"encoder", "filter", "tracker", "scaler"},
        "port": {"in", "out"},
        "param": {"codec", "cutoff", "window", "factor"},
    }
    param = case.candidate_by_semantic_id("hier_t_0003_m2.s2.b1.param")
    assert f'<span id="{param.candidate_id}" class="param">factor</span>' in case.source
    # nesting mirrors the latent: 2 sections; wrapper + 4 stage divs + 8 block divs, all closed;
    # each block holds two port spans and one param span
    assert case.source.count("<section ") == case.source.count("</section>") == 2
    assert case.source.count("<div ") == case.source.count("</div>") == 1 + 4 + 8
    assert case.source.count('class="stage"') == 4 and case.source.count('class="block"') == 8
    assert case.source.count("<span ") == 24 and case.source.count('class="param"') == 8


def test_targeted_balance_and_sizes():
    # one candidate window at every depth; fewer modules as depth grows; every level branches
    for cond, depth in (("depth_2", 2), ("depth_3", 3), ("depth_4", 4)):
        lats = [h.sample(random.Random(1000 + slot), f"hier_{slot}", cond, slot) for slot in range(40)]
        assert {lat.depth for lat in lats} == {depth}
        assert all(34 <= len(h.nodes(lat)) <= 52 for lat in lats)
        assert {len(lat.module_names) for lat in lats} == {2}
        assert all(h.branches_at_every_level(lat.block_paths) for lat in lats)
        widest = 6 if depth == 2 else 3  # children per container: 4-6 blocks at depth 2, <= 3 deeper
        assert all(max(p) <= widest for lat in lats for p in lat.block_paths)
        assert all(lat.target_kind == "port" for lat in lats)
        assert sum(lat.target_role == "input" for lat in lats) == 20
        counts = [sum(lat.template_index == t for lat in lats) for t in range(5)]
        assert counts == [8, 8, 8, 8, 8]
    broad = [h.sample(random.Random(slot), f"hier_b{slot}", None, slot) for slot in range(50)]
    assert [sum(lat.depth == d for lat in broad) for d in (2, 3, 4)] == [18, 16, 16]
    # even slots (tree + dom) cover every depth as the odd (tree-only) slots do
    assert [sum(lat.depth == d for lat in broad[::2]) for d in (2, 3, 4)] == [9, 8, 8]
    assert sum(lat.target_kind == "block" for lat in broad) == 10


def test_branches_at_every_level():
    assert h.branches_at_every_level(((1,), (2,)))
    assert not h.branches_at_every_level(((1,),))
    assert h.branches_at_every_level(((1, 1), (1, 2), (2, 1)))
    assert not h.branches_at_every_level(((1, 1), (2, 1)))  # no stage holds two blocks
    assert not h.branches_at_every_level(((1, 1, 1), (1, 1, 2)))  # one unit, one stage
    assert h.branches_at_every_level(((1, 1, 1), (1, 2, 1), (1, 2, 2), (2, 1, 1)))


def test_unknown_condition_raises():
    with pytest.raises(ValueError):
        h.sample(random.Random(0), "x", "depth_5", 0)


def test_canonical_and_determinism():
    lat = _fixed_latent()
    again = h.sample(random.Random(20260824), "other_id", "depth_3", 3)
    assert lat.canonical() == again.canonical()
    assert "hier_t_0003" not in json.dumps(lat.canonical())
    a, b = compile_tree(lat, random.Random(5)), compile_tree(lat, random.Random(5))
    assert a.source == b.source and a.candidates == b.candidates
    a, b = compile_dom(lat, random.Random(5)), compile_dom(lat, random.Random(5))
    assert a.source == b.source and a.candidates == b.candidates


def test_vocabulary_disjoint_from_templates():
    vocab = h.vocabulary()
    template_words = set()
    for by_depth in vocab["templates"].values():
        for templates in by_depth.values():
            for t in templates:
                template_words |= tokenize(re.sub(r"\{[a-z_]+\}", " ", t))
    params = set(vocab["block_params"].values())
    names = set(vocab["block_names"]) | {w.lower() for w in vocab["module_words"] + vocab["module_letters"]}
    assert not (names | params | {"param"}) & template_words
    assert not set(vocab["block_names"]) & {w.lower() for w in vocab["module_words"]}
    # one distinct single-token parameter name per block name, clashing with no other name
    assert set(vocab["block_params"]) == set(vocab["block_names"])
    assert len(params) == len(vocab["block_names"]) and all(tokenize(p) == {p} for p in params)
    assert not params & names


def _gated(case, latent_id):
    """The shared degeneracy gate and latent executor applied to a compiled case."""
    rec = ExBindRecord(case=case, latent_id=latent_id, suite="targeted")
    ref = rec.reference_json()
    return gate_degeneracy(rec, ref, "targeted"), execute_target(load_reference(ref))


def test_decoy_gate_reports_missing_decoys():
    case = compile_tree(_fixed_latent(), random.Random(3))
    assert _gated(case, "hier_fixed")[0] == (True, "")
    only_gold_module = [c for c in case.candidates if c.meaning.group == case.target.group]
    case.candidates = only_gold_module
    assert _gated(case, "hier_fixed")[0] == (False, "no same-slot decoy in another group")


# ---------------------------------------------------------------- invariant loop


OUTPUT_KEY = {"tree": "target_id", "dom": "dom_id"}


def test_invariants_over_seeds():
    shuffled = total = 0
    for seed in range(300):
        for cond in CONDITIONS:
            slot = seed % 40
            lat = h.sample(random.Random(seed * 7 + 1), f"hier_{seed:04d}", cond, slot)
            doc_sids = [n.semantic_id for n in h.nodes(lat)]
            cases = [compile_tree(lat, random.Random(seed * 7 + 2)), compile_dom(lat, random.Random(seed * 7 + 3))]
            assert cases[0].instruction == cases[1].instruction
            assert cases[0].target == cases[1].target
            for case in cases:
                meanings = [c.meaning for c in case.candidates]
                sids = [m.semantic_id for m in meanings]
                ids = [c.candidate_id for c in case.candidates]
                assert len(set(sids)) == len(sids) == len(doc_sids) and len(set(ids)) == len(ids)
                assert all(s.startswith(lat.latent_id) for s in sids)
                (gold_id,) = case.gold().values()
                decoys, hits = _gated(case, lat.latent_id)
                assert hits == [{OUTPUT_KEY[case.format]: gold_id}]  # unique gold under the shared executor
                assert decoys == (True, "")
                # one role-less param per block; it shares a block target's group, path and role
                # (kind differs only), and nothing but the other-role port shares a port target's slot
                assert sum(m.kind == "param" for m in meanings) == len(lat.module_names) * len(lat.block_paths)
                t = case.target
                near = [m for m in meanings if (m.group, m.path, m.role) == (t.group, t.path, t.role)]
                assert sorted(m.kind for m in near) == sorted([t.kind, "param"] if t.kind == "block" else [t.kind])
                assert gold_id not in case.instruction
                for cid in ids:
                    assert case.source.count(cid) == 1
                assert not _lexical_solves(case)
                assert not _type_only_solves(case)
                total += 1
                shuffled += sids != doc_sids
    assert shuffled >= total - 2


def _dom_parents(source: str) -> dict[str, str | None]:
    """Candidate id -> id of the nearest enclosing element that has an id (None at top level)."""
    from html.parser import HTMLParser

    class Parents(HTMLParser):
        def __init__(self):
            super().__init__()
            self.stack: list[str | None] = []
            self.parent: dict[str, str | None] = {}

        def handle_starttag(self, tag, attrs):
            eid = dict(attrs).get("id")
            if eid is not None:
                self.parent[eid] = next((x for x in reversed(self.stack) if x), None)
            self.stack.append(eid)

        def handle_endtag(self, tag):
            self.stack.pop()

    p = Parents()
    p.feed(source)
    assert p.stack == []
    return p.parent


def test_dom_and_tree_nesting_follow_latent():
    for seed, cond in ((1, "depth_2"), (2, "depth_3"), (3, "depth_4"), (4, None)):
        lat = h.sample(random.Random(seed), f"hier_{seed}", cond, seed)
        dom = compile_dom(lat, random.Random(seed))
        by_id = {c.candidate_id: c.meaning.semantic_id for c in dom.candidates}
        parents = _dom_parents(dom.source)
        assert set(parents) == set(by_id)
        for cid, parent in parents.items():
            sid = by_id[cid]
            expected = None if "." not in sid else sid.rsplit(".", 1)[0]
            assert (by_id[parent] if parent else None) == expected
        tree = compile_tree(lat, random.Random(seed))
        tree_sid = {c.candidate_id: c.meaning.semantic_id for c in tree.candidates}
        stack: list[str] = []
        for line in tree.source.splitlines():
            level = (len(line) - len(line.lstrip(" "))) // 2
            sid = tree_sid[re.search(r"\[(n_[0-9a-f]{4})\]", line).group(1)]
            del stack[level:]
            assert (stack[-1] if stack else None) == (None if "." not in sid else sid.rsplit(".", 1)[0])
            stack.append(sid)
