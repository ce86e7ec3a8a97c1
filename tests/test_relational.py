"""Tests for the relational family, its svg/canvas compilers and rasterization."""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import random
import xml.etree.ElementTree as ET
from collections import Counter

import numpy as np
import pytest
from PIL import Image

from exbind_scoring import RELATIONS, execute_target, load_reference, relation_holds, tokenize
from generator.records import ExBindRecord
from generator.compilers.canvas import compile_canvas, parse_canvas_program, scene_to_svg
from generator.compilers.svg import SVG_NS, compile_svg, svg_document
from generator.families import relational as rel
from generator.render import IMAGE_SIZE, rasterize

ET.register_namespace("", SVG_NS)


def _case(fmt: str, seed: int, slot: int = 0):
    rng = random.Random(seed)
    latent = rel.sample(rng, f"rel_{seed:04d}", None, slot)
    compile_fn = compile_svg if fmt == "svg" else compile_canvas
    return latent, compile_fn(latent, rng)


def _pixels(svg: str) -> np.ndarray:
    png, _ = rasterize(svg)
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


# ---------------------------------------------------------------- fixed-seed exact values


def test_fixed_seed_latent_and_instruction():
    latent, case = _case("svg", 7, slot=5)
    assert latent.relation == "above" and latent.template == 2  # slot 5: pair 2, odd slot
    assert latent.target_grouped is False
    assert len(latent.objects) == 7
    assert case.instruction == "Find the orange circle located in the same column above the red triangle."
    assert len(case.candidates) == 11  # 7 objects, 2 of them groups with 2 children each
    assert case.gold() == {"target_id": "e_9d43"}
    assert case.target.entity == "rel_0007_obj6"
    assert case.target.anchor == "rel_0007_obj5"
    assert case.target.anchor_position == (2, 1)
    assert case.target.relation == "above"
    assert case.target.attributes == (("color", "orange"), ("shape", "circle"))
    assert case.image_size == (440, 360) == IMAGE_SIZE


def test_fixed_seed_canvas():
    latent, case = _case("canvas", 7, slot=5)
    assert case.instruction.endswith("located in the same column above the red triangle.")
    assert len(case.candidates) == 7
    assert case.gold() == {"target_id": "o_49d4"}
    assert case.source.count("// object o_") == 7
    assert case.source.splitlines()[0] == "// Canvas scene with 7 objects."
    assert [c.candidate_type for c in case.candidates] == ["canvas_object"] * 7


def test_determinism_same_seed_same_case_and_png():
    _, a = _case("svg", 11, 3)
    _, b = _case("svg", 11, 3)
    assert a == b
    assert rasterize(a.render_svg) == rasterize(b.render_svg)
    _, c = _case("canvas", 11, 3)
    _, d = _case("canvas", 11, 3)
    assert c == d and c.source == d.source


def test_balance_for_slot_covers_every_pair_and_balances_relations():
    """Even slots (the svg + canvas latents) alone cover every (relation, template) pair, so
    all 8 templates reach svg; over the broad slots 0..49 (canvas) and even slots (svg) the
    templates and relations are balanced to the exact counts below."""
    even = [rel.balance_for_slot(s) for s in range(0, 8 * len(rel.TEMPLATES), 2)]
    assert len(set(even)) == 4 * len(rel.TEMPLATES) == 32
    svg = [rel.balance_for_slot(s) for s in range(0, 50, 2)]
    canvas = [rel.balance_for_slot(s) for s in range(50)]
    assert Counter(t for _, t in svg) == {0: 4, 1: 3, 2: 3, 3: 3, 4: 3, 5: 3, 6: 3, 7: 3}
    assert Counter(t for _, t in canvas) == {0: 8, 1: 6, 2: 6, 3: 6, 4: 6, 5: 6, 6: 6, 7: 6}
    assert Counter(r for r, _ in svg) == {"above": 6, "below": 6, "left_of": 6, "right_of": 7}
    assert Counter(r for r, _ in canvas) == {"above": 12, "below": 13, "left_of": 12, "right_of": 13}


def test_relation_triples_balance_target_and_distractor_distance():
    """Uniform (anchor, target, distractor) triples: the target is nearer the anchor exactly as
    often as the opposite-side distractor, per relation (so 'nearest' is no shortcut)."""
    for relation in RELATIONS:
        triples = rel.relation_triples(relation)
        dist = lambda p, a: abs(p[0] - a[0]) + abs(p[1] - a[1])  # noqa: E731
        nearer = Counter((dist(t, a) > dist(d, a)) - (dist(t, a) < dist(d, a)) for a, t, d in triples)
        assert nearer[1] == nearer[-1]
        assert all(relation_holds(relation, t, a) and relation_holds(rel.OPPOSITE[relation], d, a)
                   for a, t, d in triples)
    # per column 2 + 2 triples x 5 columns; per row 3 + 4 + 3 x 4 rows
    assert [len(rel.relation_triples(r)) for r in RELATIONS] == [20, 20, 40, 40]


def test_relation_phrases_state_the_predicate():
    """The phrases say what relation_holds means: same column (row), any distance; never 'directly'."""
    assert rel.RELATION_PHRASES == {
        "above": "in the same column above",
        "below": "in the same column below",
        "left_of": "in the same row to the left of",
        "right_of": "in the same row to the right of",
    }
    assert len(rel.TEMPLATES) == 8
    n_between = 0
    for slot in range(32):
        latent, case = _case("svg", 300 + slot, slot)
        assert "directly" not in case.instruction
        axis = "column" if latent.relation in ("above", "below") else "row"
        assert f" in the same {axis} " in case.instruction
        (tc, tr), (ac, ar) = latent.target.position, latent.anchor.position
        between = [
            o for o in latent.objects
            if (axis == "column" and o.position[0] == tc and min(tr, ar) < o.position[1] < max(tr, ar))
            or (axis == "row" and o.position[1] == tr and min(tc, ac) < o.position[0] < max(tc, ac))
        ]
        n_between += bool(between)
    assert n_between == 11  # of 32: cases where another object sits between target and anchor


def test_condition_must_be_none():
    with pytest.raises(ValueError):
        rel.sample(random.Random(0), "x", "compact", 0)


def test_canonical_is_json_without_ids():
    latent, _ = _case("svg", 3)
    canon = latent.canonical()
    text = json.dumps(canon, sort_keys=True)
    assert "rel_0003" not in text
    assert canon["relation"] == latent.relation and len(canon["objects"]) == len(latent.objects)
    assert "template" not in canon and "target_grouped" not in canon


def test_degeneracy_check_detects_missing_distractor():
    latent, _ = _case("svg", 5)
    assert rel.target_identifiable_by_attributes(latent) is False
    t = latent.target
    # Recolour every same-attribute distractor with the anchor-free, target-free colour set.
    others = [c for c in rel.COLOR_NAMES if c not in (t.color, latent.anchor.color)]
    objs = tuple(
        dataclasses.replace(o, color=others[0], shape="circle" if t.shape != "circle" else "square")
        if o.attributes == t.attributes and o.entity != t.entity
        else o
        for o in latent.objects
    )
    assert rel.target_identifiable_by_attributes(dataclasses.replace(latent, objects=objs)) is True


# ---------------------------------------------------------------- svg structure


def test_svg_groups_children_and_bboxes():
    n_target_grouped = 0
    for seed in range(40):
        latent, case = _case("svg", seed, slot=seed)
        by_sem = {c.meaning.semantic_id: c for c in case.candidates}
        root = ET.fromstring(case.source)
        groups = {g.get("id") for g in root.iter(f"{{{SVG_NS}}}g")}
        group_entities = {c.meaning.entity for c in case.candidates if c.candidate_id in groups}
        assert (latent.target.entity in group_entities) == latent.target_grouped
        if latent.target_grouped:
            n_target_grouped += 1
            assert len(group_entities) >= 2  # group-ness never marks the target
        for entity in group_entities:
            g, p1, p2 = by_sem[entity], by_sem[f"{entity}.part1"], by_sem[f"{entity}.part2"]
            assert g.meaning.canonical and not p1.meaning.canonical and not p2.meaning.canonical
            assert p1.meaning.entity == p2.meaning.entity == entity
            x0 = min(p1.bbox[0], p2.bbox[0])
            y0 = min(p1.bbox[1], p2.bbox[1])
            x1 = max(p1.bbox[0] + p1.bbox[2], p2.bbox[0] + p2.bbox[2])
            y1 = max(p1.bbox[1] + p1.bbox[3], p2.bbox[1] + p2.bbox[3])
            assert g.bbox == [x0, y0, x1 - x0, y1 - y0]
        assert case.source == case.render_svg and "<text" not in case.source
        assert len({c.meaning.entity for c in case.candidates if c.meaning.canonical}) == len(latent.objects)
    assert n_target_grouped == 20  # (slot // 2) % 2 over slots 0..39


def _isolate_svg(source: str, element_id: str) -> str:
    """The document with only ``element_id`` (and its children) painted over the background."""
    root = ET.fromstring(source)
    element = next(e for e in root.iter() if e.get("id") == element_id)
    return svg_document([ET.tostring(copy.deepcopy(element), encoding="unicode").strip()])


def _assert_bbox_tight(pixels: np.ndarray, bbox: list[float]) -> None:
    ys, xs = np.nonzero((pixels != 255).any(axis=2))
    assert len(xs) > 0
    x, y, w, h = bbox
    assert xs.min() >= x and ys.min() >= y  # every painted pixel is inside the box
    assert xs.max() <= x + w - 1 and ys.max() <= y + h - 1
    assert xs.min() - x <= 2 and ys.min() - y <= 2  # and the box is not loose
    assert (x + w - 1) - xs.max() <= 2 and (y + h - 1) - ys.max() <= 2


@pytest.mark.parametrize("seed", [2, 9])
def test_svg_pixel_bboxes(seed):
    _, case = _case("svg", seed, slot=3)  # slot 3: target drawn as a group
    assert any(not c.meaning.canonical for c in case.candidates)
    for cand in case.candidates:
        _assert_bbox_tight(_pixels(_isolate_svg(case.source, cand.candidate_id)), cand.bbox)


def test_canvas_pixel_bboxes():
    _, case = _case("canvas", 4)
    bbox_of = {c.candidate_id: c.bbox for c in case.candidates}
    for entry in case.scene[1:]:
        pixels = _pixels(scene_to_svg([case.scene[0], entry]))
        _assert_bbox_tight(pixels, bbox_of[entry["id"]])


# ---------------------------------------------------------------- canvas agreement


@pytest.mark.parametrize("seed", [0, 1, 13])
def test_canvas_program_and_png_agree(seed):
    _, case = _case("canvas", seed, slot=seed)
    parsed = parse_canvas_program(case.source)
    assert parsed == case.scene
    assert scene_to_svg(parsed) == case.render_svg
    assert rasterize(scene_to_svg(parsed)) == rasterize(case.render_svg)
    assert [e["id"] for e in parsed[1:]] and {e["id"] for e in parsed[1:]} == {
        c.candidate_id for c in case.candidates
    }


def test_canvas_parse_rejects_unknown_statement():
    with pytest.raises(ValueError):
        parse_canvas_program('ctx.fillText("hi", 0, 0);\n')


def test_rasterize_size_and_determinism():
    _, case = _case("svg", 21)
    png1, size1 = rasterize(case.render_svg)
    png2, size2 = rasterize(case.render_svg)
    assert png1 == png2 and size1 == size2 == (440, 360)
    assert png1[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- invariants (gates) loop


def _check_invariants(latent, case) -> None:
    gold_id = case.gold()["target_id"]
    cands = case.candidates
    ids = [c.candidate_id for c in cands]
    # mapping: semantic ids unique, ids distinct, gold = mapped target
    assert len(set(ids)) == len(ids)
    assert len({c.meaning.semantic_id for c in cands}) == len(cands)
    assert all(c.meaning.semantic_id.startswith(latent.latent_id) for c in cands)
    # unique gold by executing the spec against Meanings (canonical = one per entity)
    sat = [
        c
        for c in cands
        if c.meaning.canonical
        and c.meaning.entity != case.target.anchor
        and c.meaning.attributes == case.target.attributes
        and relation_holds(case.target.relation, c.meaning.position, case.target.anchor_position)
    ]
    assert [c.candidate_id for c in sat] == [gold_id]
    hits = execute_target(load_reference(ExBindRecord(case=case, latent_id=latent.latent_id, suite="broad").reference_json()))
    assert hits == [{"target_id": gold_id}]  # the shared latent executor agrees
    assert [o.entity for o in rel.objects_satisfying(latent)] == [latent.target.entity]
    # degeneracy: a same-attribute distractor fails the relation; anchor is a candidate
    same = [c for c in cands if c.meaning.canonical and c.meaning.attributes == case.target.attributes]
    assert len(same) >= 2 and not rel.target_identifiable_by_attributes(latent)
    assert any(c.meaning.entity == case.target.anchor and c.meaning.canonical for c in cands)
    anchor_attrs = latent.anchor.attributes
    assert sum(1 for c in cands if c.meaning.canonical and c.meaning.attributes == anchor_attrs) == 1
    # relation necessity: a same-attribute distractor on the opposite side of the anchor
    apos = case.target.anchor_position
    assert any(relation_holds(rel.OPPOSITE[case.target.relation], c.meaning.position, apos) for c in same)
    assert len(rel.objects_fitting_without_direction(latent)) >= 2
    # a relation decoy with other attributes stands in the relation whenever the ray has room
    ray_cells = sum(relation_holds(case.target.relation, (c, r), apos)
                    for c in range(rel.GRID_COLS) for r in range(rel.GRID_ROWS))
    has_decoy = any(
        c.meaning.canonical
        and c.meaning.attributes != case.target.attributes
        and relation_holds(case.target.relation, c.meaning.position, apos)
        for c in cands
    )
    assert has_decoy == (ray_cells >= 2)
    # leakage: gold absent from the instruction; every id occurs exactly once in the source
    assert gold_id not in case.instruction
    assert all(case.source.count(i) == 1 for i in ids)
    # lexical-only: overlap ties (all texts empty) -> never a unique top choice
    overlaps = [len(tokenize(case.instruction) & tokenize(c.text)) for c in cands]
    best = max(overlaps)
    assert not (overlaps.count(best) == 1 and overlaps[ids.index(gold_id)] == best)
    # type-only: gold is never the unique candidate of its type
    gold_type = cands[ids.index(gold_id)].candidate_type
    assert sum(1 for c in cands if c.candidate_type == gold_type) > 1
    # bboxes inside the image; positions on the grid, one object per cell
    w, h = case.image_size
    assert all(0 <= c.bbox[0] and c.bbox[0] + c.bbox[2] <= w and c.bbox[1] >= 0 and c.bbox[1] + c.bbox[3] <= h for c in cands)
    positions = [o.position for o in latent.objects]
    assert len(set(positions)) == len(positions)
    assert 5 <= len(latent.objects) <= 8


def test_invariants_smoke_loop():
    gold_ranks = Counter()
    for seed in range(60):
        for fmt in ("svg", "canvas"):
            latent, case = _case(fmt, 1000 + seed, slot=seed)
            _check_invariants(latent, case)
            gold_ranks[[c.candidate_id for c in case.candidates].index(case.gold()["target_id"])] += 1
    assert len(gold_ranks) >= 6  # gold is not at a fixed inventory position
