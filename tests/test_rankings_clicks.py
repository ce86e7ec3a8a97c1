"""Ranked and click predictions in the one evaluator (issue 4; docs/specification.md §9, §11).

Real references from the generator (``generate_latent`` on broad plans):

- ``SVG`` / ``CANVAS``: broad latent 2 (relational, paired), 440 x 360 px. Its target
  (``obj2``, the green diamond in the same column below the yellow diamond ``obj6``) is
  drawn in SVG as a group ``e_a497`` [103, 263, 74, 74] with two parts, ``e_be69`` (the
  ring, same box) and ``e_71d6`` [111, 271, 58, 58] (the body); in canvas as one object
  ``o_e754`` [111, 271, 58, 58]. The anchor ``obj6`` is the bare shape ``e_5e04``
  [111, 111, 58, 58], 160 px above the target.
- ``TABLE``: broad table latent 9 (conjunctive-shaped, 15 cells, gold ``cell_r03_c01``).
- ``GRAPH``: broad graph latent 0 (9 nodes, gold ``g_bce7 -> g_0adf``).

The layout facts above are asserted first (``test_fixture_layout``), so a generator change
that moves them fails loudly there rather than silently in the figures below.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import evaluate
import pytest

from exbind_aggregate import aggregate, click_summary, ranking_summary
from exbind_scoring import (
    CLICK_CLASSES,
    FIRST_VIOLATION_LABELS,
    PARSE_PATHS,
    STATUSES,
    load_reference,
    parse_prediction,
    prediction_kind,
    score_prediction,
)
from composition.release import broad_plans, generate_latent

METRIC_PATH = str(Path(__file__).resolve().parent.parent / "exbind_metric.py")


def _references() -> dict[str, str]:
    plans = list(broad_plans())
    svg, canvas = generate_latent(plans[2]).references
    out = {"svg": svg, "canvas": canvas}
    for family, slot in (("table", 9), ("graph", 0)):
        plan = next(p for p in plans if p.family == family and p.slot == slot)
        (out[family],) = generate_latent(plan).references
    return out


REFS = _references()
SVG, CANVAS, TABLE, GRAPH = REFS["svg"], REFS["canvas"], REFS["table"], REFS["graph"]
GOLD_CENTRE = (140.0, 300.0)  # centre of the gold group box [103, 263, 74, 74]


def test_fixture_layout():
    svg, canvas = load_reference(SVG), load_reference(CANVAS)
    assert svg["image_size"] == [440, 360] and svg["gold"] == {"target_id": "e_a497"}
    boxes = {c["id"]: (c["entity"].rsplit("_", 1)[1], c["canonical"], c["bbox"]) for c in svg["candidates"]}
    assert boxes["e_a497"] == ("obj2", True, [103, 263, 74, 74])
    assert boxes["e_be69"] == ("obj2", False, [103, 263, 74, 74])
    assert boxes["e_71d6"] == ("obj2", False, [111, 271, 58, 58])
    assert boxes["e_5e04"] == ("obj6", True, [111, 111, 58, 58])
    assert [c["id"] for c in svg["candidates"]].index("e_be69") < [c["id"] for c in svg["candidates"]].index("e_a497")
    assert svg["target"]["anchor"].endswith("obj6")
    assert canvas["gold"] == {"target_id": "o_e754"} and canvas["_by_id"]["o_e754"]["bbox"] == [111, 271, 58, 58]
    table, graph = load_reference(TABLE), load_reference(GRAPH)
    assert table["gold"] == {"cell_id": "cell_r03_c01"} and len(table["candidates"]) == 15
    assert graph["gold"] == {"source_id": "g_bce7", "target_id": "g_0adf"} and len(graph["candidates"]) == 9


def _check(rec: dict) -> None:
    """Vocabulary and plain-JSON invariants every record keeps."""
    assert rec["status"] in STATUSES and rec["parse_path"] in PARSE_PATHS
    assert rec["first_violation"] in FIRST_VIOLATION_LABELS
    assert all(type(v) is int and v in (0, 1) for v in rec["scores"].values())
    if rec["status"] != "valid":
        assert set(rec["scores"].values()) == {0} and isinstance(rec["reason"], str) and rec["reason"]
    if rec.get("kind") == "click":
        assert rec["click"]["class"] in CLICK_CLASSES
    json.dumps(rec, allow_nan=False)


# --------------------------------------------------------------------------- kind detection


@pytest.mark.parametrize("text, fmt, kind", [
    ('{"cell_id": "cell_r01_c01"}', "table", "reference"),
    ('{"cell_id": "cell_r01_c01", "x": 3, "y": 4}', "table", "reference"),  # a reference key wins
    ('{"ranking": ["a"]}', "table", "ranking"),
    ('{"x": 1, "y": 2}', "svg", "click"),
    ('{"point": [1, 2]}', "svg", "click"),
    ('{"x": 1}', "svg", "click"),
    ("[1, 2.5]", "svg", "click"),
    ("[1, 2, 3]", "svg", "reference"),
    ('["1", 2]', "svg", "reference"),
    ("[true, false]", "svg", "reference"),
    ('{"answer": "x"}', "svg", "reference"),
])
def test_prediction_kind(text, fmt, kind):
    value, _ = parse_prediction(text, fmt)
    assert prediction_kind(value, fmt) == kind


def test_reference_records_are_unchanged():
    rec = score_prediction('{"cell_id": "cell_r03_c01", "x": 1, "y": 2}', TABLE)
    assert (rec["status"], rec["first_violation"]) == ("valid", "none")
    assert "kind" not in rec and "click" not in rec and "rank_of_gold" not in rec
    # a reference object still wins extraction over a later click object
    rec = score_prediction('Answer {"cell_id": "cell_r03_c01"} at {"x": 1, "y": 2}', TABLE)
    assert (rec["status"], rec["parse_path"], rec["scores"]["exact"]) == ("valid", "extracted", 1)


# --------------------------------------------------------------------------- rankings

OTHERS = [c["id"] for c in load_reference(TABLE)["candidates"] if c["id"] != "cell_r03_c01"]


def _ranking(ids) -> str:
    return json.dumps({"ranking": ids})


TABLE_RANKINGS = [
    (["cell_r03_c01"], 1, "valid"),
    ([OTHERS[0], OTHERS[0], OTHERS[0], "cell_r03_c01"], 2, "valid"),   # repeats count once
    ([OTHERS[0], "zz_unknown", "cell_r03_c01"], 2, "valid"),           # unknown id skipped
    (["zz_unknown", "cell_r03_c01"], None, "invalid"),                  # unknown top-1
    (OTHERS[:6] + ["cell_r03_c01"], 7, "valid"),
    (OTHERS, None, "valid"),                                            # gold absent
    (OTHERS[:10] + ["cell_r03_c01"], 11, "valid"),
    ([" cell_r03_c01 ", 3, None], 1, "valid"),                          # stripped; junk below top skipped
]


def test_ranking_ranks_and_top1():
    for ids, rank, status in TABLE_RANKINGS:
        rec = score_prediction(_ranking(ids), TABLE)
        _check(rec)
        assert (rec["kind"], rec["rank_of_gold"], rec["status"], rec["click"]) == ("ranking", rank, status, None)
        assert rec["scores"]["exact"] == int(rank == 1)  # R@1 is the top-1's exactness
    rec = score_prediction(_ranking([OTHERS[0], "cell_r03_c01"]), TABLE)
    assert rec["predicted"] == {"cell_id": OTHERS[0]}
    invalid = score_prediction(_ranking(["zz_unknown", "cell_r03_c01"]), TABLE)
    assert invalid["predicted"] == {"cell_id": "zz_unknown"}
    assert invalid["reason"] == "ranking item 1: id 'zz_unknown' is not in the candidate inventory"


def test_ranking_top1_is_scored_as_the_reference():
    same_row = "cell_r03_c00"  # row 3, another column: the table_column error
    rec = score_prediction(_ranking([same_row, "cell_r03_c01"]), TABLE)
    assert rec["scores"] == {"candidate_valid": 1, "table_row": 1, "table_column": 0, "table_cell": 0, "exact": 0}
    assert (rec["first_violation"], rec["rank_of_gold"]) == ("table_column", 2)
    ref_rec = score_prediction(json.dumps({"cell_id": same_row}), TABLE)
    assert {k: v for k, v in rec.items() if k not in ("kind", "rank_of_gold", "click")} == ref_rec


def test_ranking_summary_exact():
    records = [score_prediction(_ranking(ids), TABLE) for ids, _, _ in TABLE_RANKINGS]
    ranks = [1, 2, 2, None, 7, None, 11, 1]
    assert [r["rank_of_gold"] for r in records] == ranks
    out = ranking_summary(records)
    assert {k: v for k, v in out.items() if k != "mrr"} == {
        "n_ranked": 8, "n_hits_at_1": 2, "recall_at_1": 0.25, "n_hits_at_5": 4, "recall_at_5": 0.5,
        "n_hits_at_10": 5, "recall_at_10": 0.625}
    assert out["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 2 + 1 / 7 + 1 / 11 + 1) / 8, abs=1e-12)
    assert round(out["mrr"], 3) == 0.404
    result = aggregate(records + [score_prediction(json.dumps({"cell_id": "cell_r03_c01"}), TABLE)])
    assert result["ranking"] == out  # reference predictions do not enter the ranking block
    assert result["kinds"] == {"reference": 1, "ranking": 8, "click": 0}
    assert result["click"] is None
    assert (result["n"], result["n_exact"], result["statuses"]) == (9, 3, {"invalid": 1, "valid": 8})
    assert aggregate([score_prediction('{"cell_id": "cell_r03_c01"}', TABLE)])["ranking"] is None
    assert ranking_summary([]) is None


@pytest.mark.parametrize("text, reason", [
    ('{"ranking": []}', "'ranking' must be a non-empty list of candidate id strings"),
    ('{"ranking": "cell_r03_c01"}', "'ranking' must be a non-empty list of candidate id strings"),
    ('{"ranking": [3, "cell_r03_c01"]}', "ranking item 1 is not one of candidate id strings"),
    ('{"ranking": ["cell_r03_c01"], "ranking": ["cell_r01_c01"]}', "conflicting duplicate key 'ranking'"),
])
def test_unreadable_rankings_are_unresolved(text, reason):
    rec = score_prediction(text, TABLE)
    _check(rec)
    assert (rec["kind"], rec["status"], rec["rank_of_gold"], rec["reason"]) == ("ranking", "unresolved", None, reason)


def test_ranking_parse_paths():
    body = _ranking(["cell_r03_c01"])
    paths = [score_prediction(t, TABLE)["parse_path"] for t in
             (body, "```json\n" + body + "\n```", "My ranking: " + body + " (best first)")]
    assert paths == ["strict", "fenced", "extracted"]


def test_graph_rankings_rank_ordered_pairs():
    s, t = "g_bce7", "g_0adf"
    other = next(c["id"] for c in load_reference(GRAPH)["candidates"] if c["id"] not in (s, t))
    cases = [
        ([[s, t]], 1, "none"),
        ([f"{s}->{t}"], 1, "none"),
        ([f" {s} -> {t} "], 1, "none"),
        ([[t, s], f"{s}->{t}"], 2, "role"),                  # the reversal is another item
        ([[t, s], [t, s], [other, t], [s, t]], 3, "role"),   # repeat counted once
        ([f"{t}->{s}", [s, "zz"], f"{s}->{t}"], 2, "role"),  # unknown endpoint skipped
        ([[s, "zz"], [s, t]], None, "candidate_valid"),      # unknown top-1: invalid
        ([[other, t]], None, "identity"),                    # gold absent
    ]
    records = []
    for items, rank, first in cases:
        rec = score_prediction(_ranking(items), GRAPH)
        _check(rec)
        assert (rec["rank_of_gold"], rec["first_violation"]) == (rank, first), items
        records.append(rec)
    assert records[3]["predicted"] == {"source_id": t, "target_id": s}
    assert records[3]["scores"] == {"candidate_valid": 1, "identity": 1, "relation": 1, "role": 0, "exact": 0}
    assert records[6]["status"] == "invalid"
    assert records[6]["reason"] == "ranking item 1: id 'zz' is not in the candidate inventory"
    out = ranking_summary(records)
    assert {k: v for k, v in out.items() if k != "mrr"} == {
        "n_ranked": 8, "n_hits_at_1": 3, "recall_at_1": 0.375, "n_hits_at_5": 6, "recall_at_5": 0.75,
        "n_hits_at_10": 6, "recall_at_10": 0.75}
    assert out["mrr"] == pytest.approx((3 + 1 / 2 + 1 / 3 + 1 / 2) / 8, abs=1e-12)
    for junk in ([f"{s}->{t}->{other}"], [[s]], [[s, t, other]], [s], [[s, 3]]):
        rec = score_prediction(_ranking(junk), GRAPH)
        assert (rec["status"], rec["rank_of_gold"]) == ("unresolved", None), junk
        assert rec["reason"] == ('ranking item 1 is not one of [source_id, target_id] pairs or '
                                 '"source_id->target_id" strings')


# --------------------------------------------------------------------------- clicks


@pytest.mark.parametrize("text, frame", [
    ('{"x": 140, "y": 300}', "pixel"),
    ("[0.3181818181818182, 0.8333333333333334]", "unit"),
    ('{"point": [318.1818181818182, 833.3333333333334]}', "thousand"),
])
def test_click_on_gold_centre_in_every_frame(text, frame):
    rec = score_prediction(text, SVG, coordinate_frame=frame)
    _check(rec)
    assert (rec["kind"], rec["status"], rec["first_violation"], rec["rank_of_gold"]) == ("click", "valid", "none", None)
    assert rec["predicted"] == {"target_id": "e_a497"}  # the group, reached through its smallest part
    click = rec["click"]
    assert (click["x_px"], click["y_px"]) == (pytest.approx(140.0), pytest.approx(300.0))
    assert (click["in_gold_box"], click["loose_hit"], click["class"], click["hit_id"]) == (True, True, "target", "e_71d6")


def test_click_on_a_part_of_the_gold_group_is_exact():
    # (105, 265) lies in the group box and its equal-area part e_be69 but not in e_71d6:
    # the tie goes to e_be69 (earlier in released order), whose entity's canonical id is gold
    rec = score_prediction('{"x": 105, "y": 265}', SVG, coordinate_frame="pixel")
    assert (rec["status"], rec["predicted"], rec["scores"]["exact"]) == ("valid", {"target_id": "e_a497"}, 1)
    assert rec["click"] == {"x_px": 105.0, "y_px": 265.0, "in_gold_box": True, "loose_hit": True,
                            "class": "target", "hit_id": "e_be69", "outside_frame": False}
    # edges are inclusive: the group's far corner (177, 337)
    corner = score_prediction('{"x": 177, "y": 337}', SVG, coordinate_frame="pixel")
    assert (corner["scores"]["exact"], corner["click"]["hit_id"]) == (1, "e_be69")


def test_click_on_the_anchor_is_a_distractor():
    rec = score_prediction('{"x": 140, "y": 140}', SVG, coordinate_frame="pixel")
    _check(rec)
    assert rec["predicted"] == {"target_id": "e_5e04"}  # the anchor (a bare shape)
    assert rec["scores"] == {"candidate_valid": 1, "identity": 0, "attribute": 0, "anchor": 0, "relation": 0,
                             "exact": 0}
    assert rec["first_violation"] == "identity"
    # 160 px from the gold centre, within 2 x 74 * sqrt(2) = 209.3 px: a loose hit, not in the box
    assert rec["click"] == {"x_px": 140.0, "y_px": 140.0, "in_gold_box": False, "loose_hit": True,
                            "class": "distractor", "hit_id": "e_5e04", "outside_frame": False}


def test_click_in_empty_space_is_neither():
    rec = score_prediction("[420, 340]", SVG, coordinate_frame="pixel")
    _check(rec)
    assert (rec["status"], rec["predicted"], rec["reason"]) == (
        "invalid", {"x": 420, "y": 340}, "click at (420, 340) px is in no candidate's box")
    assert rec["click"] == {"x_px": 420.0, "y_px": 340.0, "in_gold_box": False, "loose_hit": False,
                            "class": "neither", "hit_id": None, "outside_frame": False}
    # canvas draws only the body: (105, 265) is empty there, yet near the gold centre
    rec = score_prediction('{"x": 105, "y": 265}', CANVAS, coordinate_frame="pixel")
    assert (rec["click"]["class"], rec["click"]["in_gold_box"], rec["click"]["loose_hit"]) == ("neither", False, True)


@pytest.mark.parametrize("text, frame, reason", [
    ('{"x": 441, "y": 10}', "pixel", "click (441, 10) is outside the pixel frame [0, 440] x [0, 360]"),
    ("[1.2, 0.5]", "unit", "click (1.2, 0.5) is outside the unit frame [0, 1] x [0, 1]"),
    ('{"point": [-1, 5]}', "thousand", "click (-1, 5) is outside the thousand frame [0, 1000] x [0, 1000]"),
    ("[220, 60]", "unit", "click (220, 60) is outside the unit frame [0, 1] x [0, 1]"),  # never guessed
    ("[1e308, 1e308]", "pixel", "click (1e+308, 1e+308) is outside the pixel frame [0, 440] x [0, 360]"),
])
def test_click_out_of_frame_is_invalid(text, frame, reason):
    rec = score_prediction(text, SVG, coordinate_frame=frame)
    _check(rec)
    assert (rec["status"], rec["reason"], rec["click"]["class"]) == ("invalid", reason, "invalid")
    assert (rec["click"]["x_px"], rec["click"]["in_gold_box"], rec["click"]["loose_hit"]) == (None, False, False)
    assert rec["click"]["outside_frame"] is True


def test_click_without_a_frame_is_invalid_with_reason():
    rec = score_prediction('{"x": 220, "y": 60}', SVG)
    _check(rec)
    assert (rec["status"], rec["click"]["class"], rec["predicted"]) == ("invalid", "invalid", {"x": 220, "y": 60})
    assert "pass coordinate_frame=" in rec["reason"]
    with pytest.raises(ValueError, match="coordinate_frame must be one of"):
        score_prediction('{"x": 220, "y": 60}', SVG, coordinate_frame="pixels")


def test_click_on_a_text_format_is_invalid_with_reason():
    rec = score_prediction('{"x": 0.5, "y": 0.5}', TABLE, coordinate_frame="unit")
    _check(rec)
    assert (rec["kind"], rec["status"], rec["click"]["class"]) == ("click", "invalid", "invalid")
    assert rec["reason"] == ('clicks are scored only on rendered formats (svg, canvas); this table case needs a '
                             'reference {"cell_id": "<id>"}')
    graph = score_prediction("[1, 2]", GRAPH, coordinate_frame="pixel")
    assert graph["reason"].startswith("clicks are scored only on rendered formats") and '"source_id"' in graph["reason"]


def test_click_summary_exact():
    clicks = [
        ('{"x": 140, "y": 300}', "pixel"),     # target, in box
        ("[0.3181818181818182, 0.8333333333333334]", "unit"),  # target, in box
        ('{"x": 140, "y": 140}', "pixel"),     # distractor, loose
        ("[420, 340]", "pixel"),              # neither
        ('{"x": 441, "y": 10}', "pixel"),     # invalid: out of frame
        ('{"x": 140, "y": 300}', None),        # invalid: no frame
    ]
    records = [score_prediction(t, SVG, coordinate_frame=f) for t, f in clicks]
    records.append(score_prediction('{"x": 0.5, "y": 0.5}', TABLE, coordinate_frame="unit"))  # invalid
    out = click_summary(records)
    assert {k: v for k, v in out.items() if not k.endswith("_ci")} == {
        "n_outside_frame": 1, "frame_warning": None, "n_clicks": 7, "n_in_box": 2, "point_in_box_accuracy": 2 / 7, "n_loose": 3, "loose_accuracy": 3 / 7,
        "classes": {"target": 2, "distractor": 1, "neither": 1, "invalid": 3}}
    assert [round(x, 3) for x in out["point_in_box_accuracy_ci"]] == [0.082, 0.641]
    assert [round(x, 3) for x in out["loose_accuracy_ci"]] == [0.158, 0.750]
    result = aggregate(records + [score_prediction(_ranking(["cell_r03_c01"]), TABLE)])
    assert result["click"] == out
    assert result["kinds"] == {"reference": 0, "ranking": 1, "click": 7}
    assert result["statuses"] == {"invalid": 4, "valid": 4}
    assert (result["n_exact"], result["first_violation_counts"]["identity"]) == (3, 1)
    json.dumps(result, allow_nan=False)
    assert click_summary([score_prediction('{"cell_id": "cell_r03_c01"}', TABLE)]) is None


def test_clicks_mostly_outside_their_frame_warn():
    """Thousandths scored as pixels: every click falls outside the 440 x 360 image (issue 11 item 9)."""
    # the gold centre (140, 300) px in thousandths is (318.2, 833.3): outside 440 x 360 when read as pixels
    thousandths = ['{"x": 318.2, "y": 833.3}'] * 3 + ['{"x": 140, "y": 300}']  # 3 outside, 1 inside in pixels
    records = [score_prediction(t, SVG, coordinate_frame="pixel") for t in thousandths]
    out = click_summary(records)
    assert (out["n_outside_frame"], out["n_clicks"], out["classes"]["invalid"]) == (3, 4, 3)
    assert out["frame_warning"] == (
        "3 of 4 clicks lie outside the image in their coordinate frame (pixel: [0, width] x [0, height]; "
        "unit: [0, 1]; thousand: [0, 1000]); were they given in another frame? Pass the frame the model was "
        "asked for (coordinate_frame / --coordinate-frame)")
    # half or fewer outside: no warning; the same clicks in the right frame: all in frame
    assert click_summary(records[2:])["frame_warning"] is None
    right = click_summary([score_prediction(thousandths[0], SVG, coordinate_frame="thousand")])
    assert (right["n_outside_frame"], right["frame_warning"], right["classes"]["target"]) == (0, None, 1)


# --------------------------------------------------------------------------- junk never raises

JUNK = [
    '{"x": NaN, "y": 1}', '{"x": 1, "y": Infinity}', "[NaN, NaN]", "[1e400, 2]", "[-1e400, 2]",
    "[" + "9" * 400 + ", 1]", '{"x": "10", "y": "20"}', '{"x": true, "y": false}', '{"x": null, "y": 1}',
    "[[1, 2]]", '{"point": [1, 2, 3]}', '{"point": "1,2"}', '{"point": [[1], [2]]}', '{"point": null}',
    '{"x": 1}', '{"y": 2}', '{"x": 1, "y": 2, "x": 3}', '{"point": [1, 2], "x": 5}', '{"x": [1, 2], "y": {}}',
    "[1e308, -1e308]", "[" + "9" * 400 + ", " + "9" * 400 + "]",
    '{"ranking": null}', '{"ranking": {"a": 1}}', '{"ranking": [[["deep"]]]}', '{"ranking": [NaN]}',
    '{"ranking": [1e400, "x"]}', '{"ranking": ["", "  "]}', '{"ranking": [' + '"a", ' * 2000 + '"b"]}',
    '{"ranking": [[], [1, 2], {"source_id": "a"}]}', '{"ranking": ["a->", "->b", "->"]}',
    "```\n[1, 2]\n```", 'click {"x": NaN, "y": 1} here', 'rank {"ranking": ["' + "\ud800" + '"]}',
]


@pytest.mark.parametrize("frame", [None, "pixel", "unit", "thousand"])
def test_junk_clicks_and_rankings_never_raise(frame):
    records = []
    for text in JUNK:
        for reference in REFS.values():
            rec = score_prediction(text, reference, coordinate_frame=frame)
            _check(rec)
            records.append(rec)
    result = aggregate(records)
    assert json.loads(json.dumps(result, allow_nan=False)) == result
    assert result["n"] == len(JUNK) * len(REFS)
    assert sum(result["click"]["classes"].values()) == result["click"]["n_clicks"]
    assert result["ranking"]["recall_at_1"] == 0.0  # no junk ranking names gold first


# --------------------------------------------------------------------------- the evaluate metric


@pytest.fixture(scope="module")
def metric(tmp_path_factory):
    return evaluate.load(METRIC_PATH, cache_dir=str(tmp_path_factory.mktemp("rank-click-metric")),
                         experiment_id=uuid.uuid4().hex)


def test_metric_frames_per_batch_and_at_compute(metric):
    metric.add_batch(predictions=["[0.3181818181818182, 0.8333333333333334]"], references=[SVG],
                     coordinate_frame="unit")
    metric.add(prediction='{"point": [318.1818181818182, 833.3333333333334]}', reference=CANVAS,
               coordinate_frame="thousand")
    metric.add_batch(predictions=['{"x": 140, "y": 300}'], references=[SVG])  # frame from compute()
    result = metric.compute(predictions=['{"x": 105, "y": 265}', _ranking([OTHERS[0], "cell_r03_c01"])],
                            references=[SVG, TABLE], coordinate_frame="pixel", return_per_case=True)
    per_case = result["per_case"]
    assert [r["click"]["class"] if r["kind"] == "click" else r["rank_of_gold"] for r in per_case] == [
        "target", "target", "target", "target", 2]
    assert result["click"]["n_clicks"] == 4 and result["click"]["n_in_box"] == 4
    assert result["ranking"]["recall_at_5"] == 1.0 and result["ranking"]["mrr"] == 0.5
    expected = [score_prediction("[0.3181818181818182, 0.8333333333333334]", SVG, "unit"),
                score_prediction('{"point": [318.1818181818182, 833.3333333333334]}', CANVAS, "thousand"),
                score_prediction('{"x": 140, "y": 300}', SVG, "pixel"),
                score_prediction('{"x": 105, "y": 265}', SVG, "pixel"),
                score_prediction(_ranking([OTHERS[0], "cell_r03_c01"]), TABLE)]
    assert per_case == expected
    json.dumps(result, allow_nan=False)


def test_metric_without_frame_and_bad_frame(metric):
    result = metric.compute(predictions=['{"x": 220, "y": 60}', '{"cell_id": "cell_r03_c01"}'],
                            references=[SVG, TABLE], return_per_case=True)
    assert result["click"]["classes"] == {"target": 0, "distractor": 0, "neither": 0, "invalid": 1}
    assert "pass coordinate_frame=" in result["per_case"][0]["reason"]
    assert result["n_exact"] == 1 and result["ranking"] is None
    assert "kind" not in result["per_case"][1]
    for call in (lambda: metric.add_batch(predictions=["[1, 2]"], references=[SVG], coordinate_frame="px"),
                 lambda: metric.compute(predictions=["[1, 2]"], references=[SVG], coordinate_frame=1000)):
        with pytest.raises(ValueError, match="coordinate_frame must be one of"):
            call()
    assert metric.compute(predictions=["[1, 2]"], references=[SVG], coordinate_frame="unit")["n"] == 1
