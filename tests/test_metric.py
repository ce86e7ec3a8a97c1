"""The ``evaluate`` metric and the aggregates behind it (docs/specification.md §4-§5, §11; paper A.6, A.8, Table 13).

The metric is loaded the way users load it: ``evaluate.load`` on the absolute path of
``exbind_metric.py`` from another working directory, with every Hugging Face cache in a
temporary folder; ``evaluate`` copies the file and its sibling modules into that cache.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from exbind_aggregate import aggregate, cross_format_consistency, wilson_interval
from exbind_scoring import FIRST_VIOLATION_LABELS, REFERENCE_SCHEMA, score_prediction
from generator.records import GENERATOR_VERSION
from composition.release import broad_plans, generate_latent

METRIC_PATH = str(Path(__file__).resolve().parent.parent / "exbind_metric.py")
_DYNAMIC_PACKAGE = "evaluate_modules"


def _dynamic_module_names() -> list[str]:
    return [k for k in sys.modules if k == _DYNAMIC_PACKAGE or k.startswith(_DYNAMIC_PACKAGE + ".")]


@pytest.fixture
def load_metric(tmp_path, monkeypatch):
    """``load()`` -> a fresh ``evaluate`` metric, loaded by absolute path from ``tmp_path/elsewhere``.

    Every cache ``evaluate`` reads (env vars and the values it froze at import) points
    into ``tmp_path``; ``sys.path``, the importer cache and the ``evaluate_modules``
    entries of ``sys.modules`` are restored afterwards, so no state leaks to other tests.
    """
    import evaluate

    hf = tmp_path / "hf"
    for var, sub in (("HF_HOME", ""), ("HF_MODULES_CACHE", "modules"), ("HF_METRICS_CACHE", "metrics"),
                     ("HF_EVALUATE_CACHE", "evaluate"), ("HF_DATASETS_CACHE", "datasets")):
        monkeypatch.setenv(var, str(hf / sub))
    monkeypatch.setattr(evaluate.config, "HF_MODULES_CACHE", hf / "modules")
    monkeypatch.setattr(evaluate.config, "HF_METRICS_CACHE", hf / "metrics")
    monkeypatch.setattr(evaluate.config, "HF_EVALUATE_CACHE", hf / "evaluate")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "path_importer_cache", dict(sys.path_importer_cache))
    for name in _dynamic_module_names():  # another copy may already be imported from another cache
        monkeypatch.delitem(sys.modules, name)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    def load(**kwargs):
        return evaluate.load(METRIC_PATH, **kwargs)

    yield load
    for name in _dynamic_module_names():
        del sys.modules[name]


@pytest.fixture(scope="module")
def broad() -> dict[str, list]:
    """``{format: [(ExBindRecord, reference string)]}`` of the broad suite, in plan order."""
    out: dict[str, list] = {}
    for plan in broad_plans():
        generated = generate_latent(plan)
        for rec, ref in zip(generated.records, generated.references):
            out.setdefault(rec.case.format, []).append((rec, ref))
    return out


def _gold_text(rec) -> str:
    return json.dumps(dict(rec.gold()))


def _same_slot_decoy(rec):
    """A canonical candidate at the target's slot (path, role, kind) in another module."""
    t = rec.case.target
    return next(c for c in rec.case.candidates if c.meaning.canonical and c.meaning.group != t.group
                and c.meaning.path == t.path and c.meaning.role == t.role and c.meaning.kind == t.kind)


@pytest.fixture(scope="module")
def mixed_batch(broad):
    """Eight real cases, one of every outcome kind, with their expected first violations."""
    table_a = next((r, s) for r, s in broad["table"] if dict(r.gold()) == {"cell_id": "cell_r01_c01"})
    table_b = broad["table"][0]
    graph_a, graph_b = broad["graph"][0], broad["graph"][1]
    tree = broad["tree"][0]
    svg = next((r, s) for r, s in broad["svg"]
               if any(c.meaning.entity == r.case.target.entity and not c.meaning.canonical
                      for c in r.case.candidates))
    svg_part = next(c.candidate_id for c in svg[0].case.candidates
                    if c.meaning.entity == svg[0].case.target.entity and not c.meaning.canonical)
    canvas = broad["canvas"][0]
    dom = broad["dom"][0]
    g = dict(graph_a[0].gold())
    items = [
        (table_a, '{"cell_id": "cell_r01_c00"}', "table_column"),
        (table_b, f"```json\n{_gold_text(table_b[0])}\n```", "none"),
        (graph_a, json.dumps({"source_id": g["target_id"], "target_id": g["source_id"]}), "role"),
        (graph_b, f"The edge is {_gold_text(graph_b[0])}.", "none"),
        (tree, json.dumps({"target_id": _same_slot_decoy(tree[0]).candidate_id}), "identity"),
        (svg, json.dumps({"target_id": svg_part}), "exact"),
        (canvas, '{"target_id": "o_zzzz"}', "candidate_valid"),
        (dom, "{cell_id: x", "candidate_valid"),
    ]
    predictions = [text for _, text, _ in items]
    references = [ref for (_, ref), _, _ in items]
    case_ids = [rec.id for (rec, _), _, _ in items]
    firsts = [first for _, _, first in items]
    return predictions, references, case_ids, firsts


def test_compute_on_mixed_batch(load_metric, mixed_batch):
    predictions, references, case_ids, firsts = mixed_batch
    metric = load_metric()
    result = metric.compute(predictions=predictions, references=references, return_per_case=True)
    assert Path.cwd().name == "elsewhere"
    module_file = Path(sys.modules[type(metric).__module__].__file__)
    assert module_file.name == "exbind_metric.py"
    assert module_file.is_relative_to(Path.cwd().parent / "hf" / "modules")  # copied into the tmp cache
    assert {p.name for p in module_file.parent.glob("*.py")} >= {"exbind_scoring.py", "exbind_aggregate.py"}
    assert result["n"] == 8
    assert result["n_valid"] == 6
    assert result["validity"] == 0.75
    assert result["n_exact"] == 2
    assert result["exact_accuracy"] == 0.25
    assert [round(x, 3) for x in result["exact_accuracy_ci"]] == [0.071, 0.591]
    assert result["errors_after_validity"] == 4
    expected_counts = dict.fromkeys(FIRST_VIOLATION_LABELS, 0)
    expected_counts.update({"table_column": 1, "none": 2, "role": 1, "identity": 1, "exact": 1,
                            "candidate_valid": 2})
    assert result["first_violation_counts"] == expected_counts
    assert list(result["first_violation_counts"]) == list(FIRST_VIOLATION_LABELS)
    assert result["dimension_accuracy"] == {
        "candidate_valid": {"correct": 6, "applicable": 8, "accuracy": 0.75},
        "identity": {"correct": 5, "applicable": 8, "accuracy": 0.625},
        "attribute": {"correct": 3, "applicable": 6, "accuracy": 0.5},
        "anchor": {"correct": 1, "applicable": 2, "accuracy": 0.5},
        "relation": {"correct": 3, "applicable": 4, "accuracy": 0.75},
        "hierarchy": {"correct": 1, "applicable": 2, "accuracy": 0.5},
        "ordered_role": {"correct": 2, "applicable": 4, "accuracy": 0.5},
        "structured_selection": {"correct": 1, "applicable": 2, "accuracy": 0.5},
        "exact": {"correct": 2, "applicable": 8, "accuracy": 0.25},
    }
    assert result["statuses"] == {"invalid": 1, "unresolved": 1, "valid": 6}
    assert result["parse_paths"] == {"extracted": 1, "failed": 1, "fenced": 1, "strict": 5}
    assert result["violation_set_counts"] == {
        "{}": 3, "candidate_valid": 2, "identity": 1, "role": 1, "table_column+table_cell": 1,
    }
    assert result["metric_version"] == "exbind.metric.v1"
    assert result["reference_schema"] == REFERENCE_SCHEMA
    assert result["generator_version"] == GENERATOR_VERSION
    per_case = result["per_case"]
    assert [r["case_id"] for r in per_case] == case_ids
    assert [r["first_violation"] for r in per_case] == firsts
    assert [r["status"] for r in per_case] == ["valid"] * 6 + ["invalid", "unresolved"]
    assert per_case[0]["scores"] == {"candidate_valid": 1, "table_row": 1, "table_column": 0, "table_cell": 0,
                                     "exact": 0}
    assert per_case[2]["scores"] == {"candidate_valid": 1, "identity": 1, "relation": 1, "role": 0, "exact": 0}
    # the metric's per-case records are exactly the core scorer's (one implementation)
    assert per_case == [score_prediction(p, r) for p, r in zip(predictions, references)]
    json.dumps(result, allow_nan=False)


def test_add_batch_twice_equals_single_compute(load_metric, mixed_batch):
    predictions, references, _, _ = mixed_batch
    metric = load_metric()
    metric.add_batch(predictions=predictions[:5], references=references[:5])
    metric.add_batch(predictions=predictions[5:], references=references[5:])
    batched = metric.compute(return_per_case=True)
    single = metric.compute(predictions=predictions, references=references, return_per_case=True)
    assert batched == single
    assert batched["n"] == 8 and batched["n_exact"] == 2
    no_cases = metric.compute(predictions=predictions, references=references)
    assert "per_case" not in no_cases
    json.dumps(batched, allow_nan=False)


def test_empty_compute_gives_none_rates(load_metric):
    result = load_metric().compute(predictions=[], references=[])
    assert (result["n"], result["n_valid"], result["n_exact"]) == (0, 0, 0)
    assert result["validity"] is None and result["exact_accuracy"] is None
    assert result["exact_accuracy_ci"] is None
    assert result["dimension_accuracy"]["identity"] == {"correct": 0, "applicable": 0, "accuracy": None}
    assert result["generator_version"] is None
    json.dumps(result, allow_nan=False)


def test_bad_reference_raises_naming_the_field(load_metric, mixed_batch):
    """One experiment per failure: evaluate keeps its cache-file lock when ``_compute`` raises."""
    predictions, references, _, _ = mixed_batch
    with pytest.raises(ValueError, match=r"^references: not JSON"):
        load_metric(experiment_id="bad0").compute(predictions=predictions[:1], references=["this is not a reference"])
    old = json.loads(references[0])
    old["schema"] = "exbind.reference.v0"
    with pytest.raises(ValueError, match=r"`schema` is 'exbind.reference.v0'"):
        load_metric(experiment_id="bad1").compute(predictions=predictions[:1], references=[json.dumps(old)])
    with pytest.raises(ValueError, match=r"`schema` is None"):
        load_metric(experiment_id="bad2").compute(predictions=predictions[:1],
                                                  references=[json.dumps({"cell_id": "cell_r01_c01"})])
    # a bad prediction never raises
    result = load_metric(experiment_id="bad3").compute(predictions=["", "{"], references=references[:2])
    assert result["statuses"] == {"unresolved": 2}


# --------------------------------------------------------------------------- aggregates


@pytest.mark.parametrize("k,n,expected", [
    (191, 250, [0.708, 0.812]),
    (63, 120, [0.436, 0.612]),
    (120, 120, [0.969, 1.000]),
    (0, 50, [0.000, 0.071]),
    (247, 250, [0.965, 0.996]),
])
def test_wilson_interval_paper_values(k, n, expected):
    assert [round(x, 3) for x in wilson_interval(k, n)] == expected


def test_wilson_interval_edges():
    assert wilson_interval(0, 0) is None
    assert wilson_interval(120, 120)[1] == 1.0
    assert wilson_interval(0, 50)[0] == 0.0
    with pytest.raises(ValueError, match="k=5"):
        wilson_interval(5, 4)
    with pytest.raises(ValueError):
        wilson_interval(-1, 4)


def test_aggregate_of_no_records():
    out = aggregate([])
    assert (out["n"], out["n_valid"], out["n_exact"], out["errors_after_validity"]) == (0, 0, 0, 0)
    assert out["validity"] is None and out["exact_accuracy"] is None and out["exact_accuracy_ci"] is None
    assert all(v["accuracy"] is None for v in out["dimension_accuracy"].values())
    assert all(v["rate"] is None for v in out["first_violation_profile"].values())
    assert out["survival"] == {} and out["cross_format_consistency"] == {}
    json.dumps(out, allow_nan=False)


# --------------------------------------------------------------------------- cross-format consistency


@pytest.fixture(scope="module")
def tree_dom_groups(broad):
    """The 25 broad tree-dom groups: ``[(tree (rec, ref), dom (rec, ref))]`` by group id."""
    trees = {rec.group_id: (rec, ref) for rec, ref in broad["tree"] if rec.group_id}
    doms = {rec.group_id: (rec, ref) for rec, ref in broad["dom"]}
    assert sorted(trees) == sorted(doms)
    return [(trees[g], doms[g]) for g in sorted(trees)]


def _on_surface(rec, semantic_id) -> str:
    """Text of a prediction naming the candidate with ``semantic_id`` on ``rec``'s surface."""
    (key,) = dict(rec.gold())
    cand = next(c for c in rec.case.candidates if c.meaning.semantic_id == semantic_id)
    return json.dumps({key: cand.candidate_id})


def _paired_predictions(groups):
    """Paper Table 13's Qwen2.5 pattern: 15 C->C, 2 C->I, 3 I->C, 5 I->I (same wrong answer)."""
    predictions, references = [], []
    for i, ((tree, tree_ref), (dom, dom_ref)) in enumerate(groups):
        decoy = _same_slot_decoy(tree).meaning.semantic_id
        gold = tree.case.target.semantic_id
        if i < 15:
            tree_pick, dom_pick = gold, gold
        elif i < 17:
            tree_pick, dom_pick = gold, decoy
        elif i < 20:
            tree_pick, dom_pick = decoy, gold
        else:
            tree_pick, dom_pick = decoy, decoy
        predictions += [_on_surface(tree, tree_pick), _on_surface(dom, dom_pick)]
        references += [tree_ref, dom_ref]
    return predictions, references


def test_cross_format_consistency_tree_dom(tree_dom_groups):
    assert len(tree_dom_groups) == 25
    predictions, references = _paired_predictions(tree_dom_groups)
    records = [score_prediction(p, r) for p, r in zip(predictions, references)]
    out = cross_format_consistency(records)
    assert out == {"tree-dom": {
        "groups": 25,
        "consistent": 20,
        "rate": 0.8,
        "incomplete_groups": 0,
        "transitions": {"identity->identity": 5, "identity->none": 3, "none->identity": 2, "none->none": 15},
    }}
    # surface ids differ between tree and dom, yet the wrong-the-same-way groups are consistent
    assert all(json.loads(predictions[2 * i]) != json.loads(predictions[2 * i + 1]) for i in range(20, 25))


def test_invalid_pair_is_never_consistent(tree_dom_groups):
    (tree, tree_ref), (dom, dom_ref) = tree_dom_groups[0]
    records = [score_prediction('{"target_id": "n_zzzz"}', tree_ref), score_prediction("no idea", dom_ref)]
    out = cross_format_consistency(records)["tree-dom"]
    assert (out["groups"], out["consistent"], out["rate"]) == (1, 0, 0.0)
    assert out["transitions"] == {"candidate_valid->candidate_valid": 1}
    half = cross_format_consistency(records[:1])["tree-dom"]
    assert (half["groups"], half["incomplete_groups"], half["rate"]) == (0, 1, None)


def test_cross_format_consistency_through_the_metric(load_metric, tree_dom_groups):
    predictions, references = _paired_predictions(tree_dom_groups)
    result = load_metric().compute(predictions=predictions, references=references)
    assert result["cross_format_consistency"]["tree-dom"]["rate"] == 0.8
    assert result["cross_format_consistency"]["tree-dom"]["transitions"] == {
        "identity->identity": 5, "identity->none": 3, "none->identity": 2, "none->none": 15}
    assert (result["n"], result["n_exact"]) == (50, 35)  # 15 * 2 + 2 + 3
    json.dumps(result, allow_nan=False)


def test_non_string_predictions_are_unresolved_in_any_position(tmp_path):
    import evaluate
    from composition.release import broad_plans, generate_latent

    refs = generate_latent(next(p for p in broad_plans() if p.family == "table")).references * 3
    metric = evaluate.load(str(Path(__file__).resolve().parent.parent / "exbind_metric.py"),
                           experiment_id="nonstring", cache_dir=str(tmp_path))
    first = metric.compute(predictions=[None, "x", 3], references=refs, return_per_case=True)
    last = metric.compute(predictions=["x", 3, None], references=refs)
    assert first["statuses"] == last["statuses"] == {"unresolved": 3}
    assert [r["parse_path"] for r in first["per_case"]] == ["failed"] * 3
    metric.add_batch(predictions=[1.5, b"x"], references=refs[:2])
    metric.add(prediction=None, reference=refs[2])
    assert metric.compute()["statuses"] == {"unresolved": 3}


def test_parsed_predictions_and_non_string_references_are_refused_in_any_position(tmp_path):
    """A dict output is refused as the CLI refuses it; a None reference first in a batch gives
    the scorer's ReferenceError, the same as in any other position (issue 11 items 8-9)."""
    import evaluate
    from composition.release import broad_plans, generate_latent

    from exbind_scoring import ReferenceError

    ref = generate_latent(next(p for p in broad_plans() if p.family == "table")).references[0]
    metric = evaluate.load(str(Path(__file__).resolve().parent.parent / "exbind_metric.py"),
                           experiment_id="refused", cache_dir=str(tmp_path))
    expected = ("predictions[1]: must be the raw model output as a string, got dict "
                "(pass json.dumps(value) for a parsed reference)")
    for call in (metric.compute, metric.add_batch):
        with pytest.raises(ValueError) as info:
            call(predictions=["x", {"cell_id": "cell_r01_c01"}], references=[ref, ref])
        assert str(info.value) == expected
    message = ("references: expected the dataset's `reference` JSON string, got NoneType; "
               "pass batch['reference'] from an ExBind config")
    for refs in ([None, ref], [ref, None]):
        with pytest.raises(ValueError) as info:  # the ReferenceError of evaluate's copy
            metric.compute(predictions=["x", "y"], references=refs)
        assert (type(info.value).__name__, str(info.value)) == ("ReferenceError", message)
    with pytest.raises(ReferenceError) as info:
        score_prediction("x", None)
    assert str(info.value) == message
    assert metric.compute(predictions=["x"], references=[ref])["n"] == 1
