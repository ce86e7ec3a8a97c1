"""Released rows: composition, ids, the one-record agreement of gold / mapping / reference,
model-visible vs evaluator-only fields, prompts, images and the two table controls."""

from __future__ import annotations

import json
import re
from collections import Counter

import PIL.Image

from generator.prompt import build_prompt

VISIBLE_CANDIDATE_KEYS = {"candidate_id", "candidate_type", "bbox", "roles", "column", "tag", "parent_id", "text"}


def test_composition_is_exactly_spec_section_6(rows):
    fmt = lambda c: dict(sorted(Counter(r["format"] for r in rows[c]).items()))  # noqa: E731
    assert fmt("broad") == {"canvas": 50, "dom": 25, "graph": 50, "svg": 25, "table": 50, "tree": 50}
    assert fmt("paired") == {"canvas": 25, "dom": 25, "svg": 25, "tree": 25}
    assert Counter(r["condition"] for r in rows["targeted_table"]) == {
        "compact": 40, "conjunctive": 40, "high_candidate": 40}
    assert Counter(r["condition"] for r in rows["targeted_hierarchy"]) == {"depth_2": 40, "depth_3": 40, "depth_4": 40}
    assert {r["format"] for r in rows["targeted_hierarchy"]} == {"tree"}
    assert len(rows["targeted_table_permuted"]) == 360
    assert len(rows["targeted_table_column_metadata"]) == 120
    assert {r["suite"] for r in rows["broad"]} == {"broad"}
    assert {r["condition"] for r in rows["broad"]} == {None}


def test_ids_follow_the_conventions(rows):
    for config, items in rows.items():
        ids = [r["case_id"] for r in items]
        assert len(ids) == len(set(ids)), config
    for r in rows["broad"]:
        assert r["case_id"] == f"{r['latent_id']}__{r['format']}"
    groups = Counter(r["group_id"] for r in rows["paired"])
    assert len(groups) == 50 and set(groups.values()) == {2}
    pairs = Counter(tuple(sorted(r["format"] for r in rows["paired"] if r["group_id"] == g)) for g in groups)
    assert pairs == {("canvas", "svg"): 25, ("dom", "tree"): 25}
    assert all(r["group_id"] == r["latent_id"] for r in rows["paired"])
    assert sum(r["group_id"] is not None for r in rows["broad"]) == 100
    broad_latents = {r["latent_id"] for r in rows["broad"]}
    targeted = {r["latent_id"] for c in ("targeted_table", "targeted_hierarchy") for r in rows[c]}
    assert not broad_latents & targeted


def test_gold_mapping_binding_and_reference_agree(rows):
    for config, items in rows.items():
        for r in items:
            ref = json.loads(r["reference"])
            gold = json.loads(r["gold"])
            assert ref["gold"] == gold
            assert list(gold) == ref["output_keys"] == list(json.loads(r["output_schema"]))
            mapping = {m["semantic_id"]: m["candidate_id"] for m in r["surface_mapping"]}
            assert len(mapping) == len(r["candidates"]) == len(ref["candidates"])
            assert set(mapping.values()) == {c["candidate_id"] for c in r["candidates"]}
            target = ref["target"]
            if r["family"] == "graph":
                assert gold == {"source_id": mapping[target["source_semantic_id"]],
                                "target_id": mapping[target["target_semantic_id"]]}
            else:
                assert list(gold.values()) == [mapping[target["semantic_id"]]]
                assert r["binding"]["semantic_id"] == target["semantic_id"]
            assert [c["id"] for c in ref["candidates"]] == [c["candidate_id"] for c in r["candidates"]]
            first_gold = list(gold.values())[0]
            assert r["gold_rank"] == ref["gold_rank"] == 1 + [c["candidate_id"] for c in r["candidates"]].index(first_gold)
            assert r["applicable_stages"] == ref["applicable_stages"]
            assert r["declared_order"] == ref["declared_order"]
            assert ref["case_id"] == r["case_id"]
            assert "source" not in ref and "prompt" not in ref and "observation" not in ref


def test_latent_annotations_never_reach_candidates_or_prompt(rows):
    for config, items in rows.items():
        for r in items:
            ref = json.loads(r["reference"])
            for c in r["candidates"]:
                assert set(c) == VISIBLE_CANDIDATE_KEYS
                assert (c["column"] is not None) == (config == "targeted_table_column_metadata")
                assert (c["tag"] is not None) == (r["format"] == "svg" and r["suite"] != "legacy")
                assert c["parent_id"] is None or r["format"] == "svg"
                assert (c["text"] is not None) == (config == "legacy_bridge")
            for cand in ref["candidates"]:
                assert cand["semantic_id"] not in r["prompt"]
            assert r["latent_id"] not in r["prompt"]


def test_prompt_builder_reproduces_every_row_and_hides_rendered_sources(rows):
    for items in rows.values():
        for r in items:
            assert build_prompt(r) == r["prompt"]
            assert r["prompt"].endswith("Return strict JSON only with this schema: " + r["output_schema"])
            assert "<candidate_id>" in r["output_schema"]
            if r["format"] in ("svg", "canvas"):
                assert r["observation"]["source"] not in r["prompt"]
                assert "attached image" in r["prompt"]
                assert r["observation"]["source"] in build_prompt(r, "text")
            else:
                assert r["observation"]["source"] in r["prompt"]


def test_table_cell_ids_are_visible_positions(rows):
    for r in rows["targeted_table"] + rows["broad"]:
        if r["format"] != "table":
            continue
        html = r["observation"]["source"]
        header = re.findall(r"<th>(.*?)</th>", html)
        ref = json.loads(r["reference"])
        for cand in ref["candidates"]:
            m = re.fullmatch(r"cell_r(\d\d)_c(\d\d)", cand["id"])
            assert m, cand["id"]
            assert int(m.group(1)) == cand["row"] >= 1
            assert header[int(m.group(2))] == cand["column"]
            assert f'<td id="{cand["id"]}">{cand["text"]}</td>' in html


def test_images_decode_and_boxes_lie_inside_them(loaded):
    ds = loaded["paired"]
    seen = Counter()
    for r in ds:
        ref = json.loads(r["reference"])
        if r["format"] in ("svg", "canvas"):
            assert isinstance(r["image"], PIL.Image.Image)
            assert list(r["image"].size) == ref["image_size"]
            w, h = r["image"].size
            for c in r["candidates"]:
                x, y, bw, bh = c["bbox"]
                assert 0 <= x and 0 <= y and x + bw <= w and y + bh <= h and bw > 0 and bh > 0
            seen[r["format"]] += 1
        else:
            assert r["image"] is None
            assert all(c["bbox"] is None for c in r["candidates"])
    assert seen == {"svg": 25, "canvas": 25}


def test_permutation_control_keeps_everything_but_order(rows):
    parents = {r["case_id"]: r for r in rows["targeted_table"]}
    children = Counter()
    seeds = Counter()
    for r in rows["targeted_table_permuted"]:
        parent = parents[r["parent_case_id"]]
        children[r["parent_case_id"]] += 1
        oc = r["order_control"]
        seeds[oc["permutation_seed"]] += 1
        assert r["case_id"] == f"{parent['case_id']}__perm{oc['permutation_seed'] - 2026082400}"
        for key in ("instruction", "observation", "gold", "latent_id", "condition"):
            assert r[key] == parent[key]
        assert sorted(c["candidate_id"] for c in r["candidates"]) == sorted(c["candidate_id"] for c in parent["candidates"])
        assert oc["original_order"] == [c["candidate_id"] for c in parent["candidates"]]
        assert oc["permuted_order"] == [c["candidate_id"] for c in r["candidates"]]
        assert oc["original_gold_rank"] == parent["gold_rank"]
        assert oc["permuted_gold_rank"] == r["gold_rank"]
        assert json.loads(r["reference"])["parent_case_id"] == parent["case_id"]
    assert set(children.values()) == {3} and len(children) == 120
    assert seeds == {2026082401: 120, 2026082402: 120, 2026082403: 120}
    moved = sum(r["order_control"]["original_order"] != r["order_control"]["permuted_order"]
                for r in rows["targeted_table_permuted"])
    assert moved == 360


def test_column_metadata_control_changes_only_the_column_field(rows):
    originals = {r["case_id"]: r for r in rows["targeted_table"]}
    for r in rows["targeted_table_column_metadata"]:
        o = originals[r["case_id"]]
        ref = json.loads(r["reference"])
        columns = {c["id"]: c["column"] for c in ref["candidates"]}
        assert [c["column"] for c in r["candidates"]] == [columns[c["candidate_id"]] for c in r["candidates"]]
        stripped = [{**c, "column": None} for c in r["candidates"]]
        assert stripped == o["candidates"]
        for key in ("instruction", "observation", "gold", "gold_rank", "reference", "surface_mapping"):
            assert r[key] == o[key]
        assert r["prompt"] != o["prompt"] and '"column": ' in r["prompt"]
