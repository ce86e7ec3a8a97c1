"""The two ways ``aggregate`` counts record signatures give the same figures (issue 13 item 2).

Scored records take ``_by_key`` (one hashed key per record, the rest compared with the
first record of that key); records it cannot vouch for (hand-made, missing fields,
inconsistent) take ``_signatures_each``. These tests pin that both agree and that the
fallback is taken exactly when it must be.
"""

from __future__ import annotations

import copy
import json
import sys
from collections import Counter

import pytest

from composition.release import broad_plans, generate_latent
from exbind_aggregate import _by_key, _signatures_each, aggregate
from exbind_reference import load_reference
from exbind_scoring import score_prediction


@pytest.fixture(scope="module")
def scored() -> list[dict]:
    """Records of every broad family and format, each reference answered three ways (gold, the
    first candidate, an unknown id) plus an unreadable answer, twice over (so keys repeat)."""
    references = []
    for plan in broad_plans()[::10]:
        references.extend(generate_latent(plan).references)
    records = []
    for _ in range(2):
        for ref in references:
            loaded = load_reference(ref)
            first = loaded["candidates"][0]["id"]
            for answer in (dict(loaded["gold"]), dict.fromkeys(loaded["output_keys"], first),
                           dict.fromkeys(loaded["output_keys"], "zz_unknown")):
                records.append(score_prediction(json.dumps(answer), ref))
            records.append(score_prediction("no idea", ref))
    return records


def test_scored_records_take_the_key_path_with_the_per_record_counts(scored):
    counts = _by_key(scored)
    assert counts is not None
    assert counts == _signatures_each(scored)
    assert (len(scored), sum(counts.values()), len(counts)) == (240, 240, 32)  # 32 signatures stand for 240


def test_a_record_that_disagrees_with_its_key_falls_back_and_counts(scored):
    records = copy.deepcopy(scored)
    # every record has a twin with its key (the fixture scores each answer twice)
    wrong = next(r for r in records if r["status"] == "valid" and r["violations"])
    stage = wrong["violations"][0]
    wrong["scores"][stage] = 1  # hand-made: its violations still name the stage
    assert _by_key(records) is None
    before, after = aggregate(scored), aggregate(records)
    assert after["stage_accuracy"][stage]["correct"] == before["stage_accuracy"][stage]["correct"] + 1
    assert after["stage_accuracy"][stage]["applicable"] == before["stage_accuracy"][stage]["applicable"]
    assert after["violation_set_counts"] == before["violation_set_counts"]


def test_possible_first_violations_are_compared_too(scored):
    records = copy.deepcopy(scored)
    records[-1]["possible_first_violations"] = ["exact"]
    assert _by_key(records) is None
    expected = Counter(label for r in records for label in r["possible_first_violations"])
    got = aggregate(records)["possible_first_violations"]
    assert {k: v for k, v in got.items() if v} == dict(expected)


def test_reordered_or_boolean_scores_change_no_figure(scored):
    records = copy.deepcopy(scored)
    for r in records[::3]:
        r["scores"] = dict(reversed(list(r["scores"].items())))
    for r in records[1::3]:
        r["scores"] = {s: bool(v) for s, v in r["scores"].items()}
    assert _by_key(records) is not None
    assert aggregate(records) == aggregate(scored)


def test_records_without_format_fall_back_and_kind_is_part_of_the_key(scored):
    records = copy.deepcopy(scored)
    for r in records:
        if not r.get("group_id"):
            del r["format"]
    assert _by_key(records) is None
    out = aggregate(records)
    assert out["n"] == 240 and sum(v["n"] for v in out["by_format"].values()) == 160
    assert sorted(out["by_format"]) == ["canvas", "dom", "svg", "tree"]
    assert out["cross_format_consistency"] == aggregate(scored)["cross_format_consistency"]
    records = copy.deepcopy(scored)
    records[5]["kind"] = "ranking"  # hand-made: a ranking without rank_of_gold
    counts = _by_key(records)
    assert counts is not None and counts == _signatures_each(records)
    assert aggregate(records)["kinds"] == {"reference": 239, "ranking": 1, "click": 0}


def test_fewer_than_two_records():
    assert _by_key([]) == Counter()
    assert aggregate([])["n"] == 0


def test_reference_vocabulary_is_interned():
    refs = []
    for plan in broad_plans():
        refs.extend(generate_latent(plan).references)
        if len({load_reference(r)["family"] for r in refs}) > 1 and len(refs) > 12:
            break
    loaded = [load_reference(r) for r in refs]
    for field in ("family", "format"):
        for value in {ref[field] for ref in loaded}:
            assert all(ref[field] is sys.intern(value) for ref in loaded if ref[field] == value)
    stages = [s for ref in loaded for s in ref["_stages"]]
    assert all(s is sys.intern(s) for s in stages)
