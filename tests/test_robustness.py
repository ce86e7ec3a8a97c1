"""Robustness of the scorer and the metric to hostile model outputs (issue 3; docs/specification.md §4, §11).

Property-based (hypothesis, bounded so the file stays short): arbitrary strings, JSON of
the wrong shape, huge numbers and integers too long for the JSON parser, NaN and
Infinity, deep nesting, nested objects, duplicate keys and unicode are fed to
``exbind_scoring.score_prediction`` + ``exbind_aggregate.aggregate`` and, for a smaller
sample, to the ``evaluate`` metric loaded by path. Real candidate ids of real references
(every family and format) are mixed into the generated JSON, so valid, invalid and
unresolved paths are all exercised. For every output: nothing raises, every status,
parse path and label is in the vocabulary, ``valid`` implies the ids are in the
inventory, and records and aggregates serialize with ``json.dumps(..., allow_nan=False)``.

References that are not ExBind references (or of an unknown schema version) raise
``ReferenceError`` with a message naming the field.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import evaluate
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import exbind_scoring
from exbind_aggregate import aggregate
from exbind_scoring import (
    FIRST_VIOLATION_LABELS,
    GRAPH_ALIASES,
    PARSE_PATHS,
    REFERENCE_SCHEMA,
    SINGLE_KEY_ALIASES,
    STATUSES,
    ReferenceError,
    load_reference,
    score_prediction,
)
from composition.release import broad_plans, generate_latent, targeted_plans

REPO_ROOT = Path(__file__).resolve().parent.parent
METRIC_PATH = str(REPO_ROOT / "exbind_metric.py")


CORE = settings(max_examples=100, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
METRIC = settings(max_examples=12, deadline=None, derandomize=True,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --------------------------------------------------------------------------- real references


def _real_references() -> list[str]:
    """One broad latent per family (paired ones give both surfaces: all six formats) and one
    targeted latent of each condition."""
    refs: list[str] = []
    seen: set = set()
    for plan in broad_plans():
        if plan.family not in seen and plan.grouped == (plan.family in ("relational", "hierarchy")):
            seen.add(plan.family)
            refs.extend(generate_latent(plan).references)
    for plan in targeted_plans():
        if plan.condition not in seen:
            seen.add(plan.condition)
            refs.extend(generate_latent(plan).references)
    return refs


REFERENCES = _real_references()
LOADED = [load_reference(r) for r in REFERENCES]
IDS = [[c["id"] for c in ref["candidates"]] for ref in LOADED]


def test_references_cover_every_family_and_format():
    assert len(REFERENCES) == 12
    assert sorted({r["family"] for r in LOADED}) == ["graph", "hierarchy", "relational", "table"]
    assert sorted({r["format"] for r in LOADED}) == ["canvas", "dom", "graph", "svg", "table", "tree"]
    assert sorted(r["condition"] for r in LOADED if r["condition"]) == [
        "compact", "conjunctive", "depth_2", "depth_3", "depth_4", "high_candidate"]


# --------------------------------------------------------------------------- strategies

ANSWER_KEYS = sorted(set(SINGLE_KEY_ALIASES) | set(GRAPH_ALIASES))
KEYS = st.one_of(st.sampled_from(ANSWER_KEYS + ["candidate_id", "ID", "Cell_Id", "answer", ""]),
                 st.text(max_size=6))
ODD_CHARS = ["\ud800", "\udfff", "\ufeff", "\x00", "\u200b", "\u00a0", "\u202e", "\uff5b", "\uff5d",
             "\U0001f600", "é", "\\", '"', "{", "}", "`", "\n", "\t"]


def _leaves(ids: list[str]):
    return st.one_of(
        st.none(), st.booleans(),
        st.integers(), st.integers(min_value=10**30, max_value=10**40),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=12),
        st.sampled_from(ids),
        st.sampled_from(ids).map(lambda s: f" {s}\t"),  # whitespace is stripped
        st.sampled_from(ids).map(str.upper),            # ids are case-sensitive
        st.sampled_from(ids).map(lambda s: s + "\u200b"),  # not whitespace: stays invalid
        st.sampled_from(ODD_CHARS),
    )


def _json_values(ids: list[str]):
    return st.recursive(_leaves(ids), lambda kids: st.lists(kids, max_size=3) | st.dictionaries(KEYS, kids, max_size=3),
                        max_leaves=8)


def _object_text(ids: list[str]):
    """A JSON object written by hand, so keys may repeat (with equal or different values)."""
    pair = st.tuples(st.sampled_from(ANSWER_KEYS) | KEYS, st.sampled_from(ids) | _json_values(ids))

    def render(pairs):
        return "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v, allow_nan=True)}" for k, v in pairs) + "}"

    dup = st.tuples(st.sampled_from(ANSWER_KEYS), st.sampled_from(ids), st.sampled_from(ids)).map(
        lambda t: [(t[0], t[1]), (t[0], t[2])])
    return st.one_of(st.lists(pair, min_size=1, max_size=4), dup).map(render)


def _answer_text(ids: list[str]):
    """Answer-shaped JSON: alias keys with real ids, sometimes a wrong type or an extra key."""
    answer = st.dictionaries(st.sampled_from(ANSWER_KEYS), st.sampled_from(ids) | _leaves(ids), min_size=1, max_size=3)
    return answer.map(lambda d: json.dumps(d, allow_nan=True))


def _special_text(ids: list[str]):
    big = "9" * 5000
    return st.sampled_from(ids).flatmap(lambda i: st.sampled_from([
        '{"cell_id": ' + big + "}",
        '{"id": "' + i + '", "n": ' + big + "}",
        big,
        '{"id": 1e400}', '{"id": -1e400}', "NaN", "-Infinity", '{"id": NaN}', '{"target_id": Infinity}',
        "[" * 100_000, "[" * 3000 + "]" * 3000, '{"a": ' * 3000 + "1" + "}" * 3000,
        '{"x": ' * 50 + json.dumps({"id": i}) + "}" * 50,
        "{" * 5000 + json.dumps({"id": i}),
        json.dumps({"id": i}) + "}" * 5000,
        '{"id": "' + i + '", "id": "' + i + '"}',
        '{"id": "' + i + '", "element_id": "' + i + '"}',
        '{"source": "' + i + '", "target": "' + i + '"}',
        json.dumps({"candidate_id": i, "candidate_type": "cell"}),
        json.dumps([{"id": i}]),
        json.dumps(i),
        "\ufeff" + json.dumps({"id": i}),
        "\uff5b\"id\": \"" + i + "\"\uff5d",
        json.dumps({"id": i}, ensure_ascii=False).replace(i, i + "\ud800"),
        "```\n" + json.dumps({"id": i}) + "\n```",
        "```json " + json.dumps({"id": i}) + "```",
        'the "{" key; then {"id": "' + i + '"} done',
        "",
        " \n\t ",
    ]))


def _wrapped(body):
    """Model-output framings around a body: as is, fenced, in prose, truncated, doubled."""
    return st.tuples(body, st.integers(0, 5), st.text(max_size=15), st.integers(0, 200)).map(
        lambda t: [
            t[0],
            "```json\n" + t[0] + "\n```",
            t[2] + " The answer is " + t[0] + ". " + t[2],
            t[0][: t[3]],
            t[0] + "\n" + t[0],
            t[2] + t[0],
        ][t[1]])


def _clean_answer(ids: list[str], keys: list[str]):
    """Exactly the output keys with inventory ids (valid predictions, right or wrong)."""
    return st.fixed_dictionaries({k: st.sampled_from(ids) for k in keys}).map(json.dumps)


def _prediction(ids: list[str], keys: list[str]):
    clean = _wrapped(_clean_answer(ids, keys))
    return st.one_of(
        clean,
        clean,
        st.text(max_size=40),
        st.lists(st.sampled_from(list('{}[]":,\\ `') + ODD_CHARS + ["id", "cell_id", "a"]), max_size=25).map("".join),
        _wrapped(_answer_text(ids)),
        _wrapped(_object_text(ids)),
        _wrapped(_json_values(ids).map(lambda v: json.dumps(v, allow_nan=True))),
        _special_text(ids),
    )


@st.composite
def cases(draw, max_size=8, utf8_only=False):
    """[(prediction, reference string)] over random real references."""
    out = []
    for _ in range(draw(st.integers(1, max_size))):
        k = draw(st.integers(0, len(REFERENCES) - 1))
        text = draw(_prediction(IDS[k], LOADED[k]["output_keys"]))
        if utf8_only:
            text = text.encode("utf-8", "replace").decode("utf-8")
        out.append((text, REFERENCES[k]))
    return out


# --------------------------------------------------------------------------- record checks


def check_record(rec: dict, reference: str) -> None:
    ref = load_reference(reference)
    stages = list(ref["_stages"])
    assert rec["case_id"] == ref["case_id"]
    assert rec["status"] in STATUSES
    assert rec["parse_path"] in PARSE_PATHS
    assert rec["first_violation"] in FIRST_VIOLATION_LABELS
    assert set(rec["possible_first_violations"]) <= set(FIRST_VIOLATION_LABELS)
    assert list(rec["scores"]) == ["candidate_valid", *stages, "exact"]
    assert all(type(v) is int and v in (0, 1) for v in rec["scores"].values())
    if rec["status"] == "valid":
        predicted = rec["predicted"]
        assert list(predicted) == list(ref["output_keys"])
        assert all(type(v) is str and v == v.strip() and v in ref["_by_id"] for v in predicted.values())
        assert rec["scores"]["candidate_valid"] == 1
        assert rec["violations"] == [s for s in stages if rec["scores"][s] == 0]
        assert rec["reason"] is None
        assert rec["predicted_latent"] is not None
        assert rec["scores"]["exact"] == int(predicted == ref["gold"])
        if rec["violations"]:
            assert rec["first_violation"] == rec["violations"][0]
        else:
            assert rec["first_violation"] == ("none" if rec["scores"]["exact"] else "exact")
    else:
        assert rec["violations"] == ["candidate_valid"]
        assert rec["first_violation"] == "candidate_valid"
        assert rec["possible_first_violations"] == ["candidate_valid"]
        assert set(rec["scores"].values()) == {0}
        assert rec["predicted_latent"] is None
        assert isinstance(rec["reason"], str) and rec["reason"]
        if rec["status"] == "invalid":
            assert any(v not in ref["_by_id"] for v in rec["predicted"].values())
        else:
            assert rec["predicted"] is None
    if rec["parse_path"] == "failed":
        assert rec["status"] == "unresolved"
    json.dumps(rec, allow_nan=False)


def check_aggregate(result: dict, records: list[dict]) -> None:
    text = json.dumps(result, allow_nan=False)
    assert json.loads(text) == result
    assert result["n"] == len(records)
    assert set(result["statuses"]) <= set(STATUSES)
    assert sum(result["statuses"].values()) == len(records)
    assert set(result["parse_paths"]) <= set(PARSE_PATHS)
    assert sum(result["first_violation_counts"].values()) == len(records)
    assert result["n_valid"] == sum(r["status"] == "valid" for r in records)


# --------------------------------------------------------------------------- core scorer


@CORE
@given(cases())
def test_core_scorer_never_raises_and_stays_in_vocabulary(batch):
    records = [score_prediction(text, ref) for text, ref in batch]
    for rec, (_, ref) in zip(records, batch):
        check_record(rec, ref)
    check_aggregate(aggregate(records), records)


@CORE
@given(st.integers(0, len(REFERENCES) - 1), st.data())
def test_parse_and_normalize_never_raise(k, data):
    ref = LOADED[k]
    text = data.draw(_prediction(IDS[k], ref["output_keys"]))
    value, path = exbind_scoring.parse_prediction(text, ref["format"])
    assert path in PARSE_PATHS
    if path == "failed":
        assert value is None
    normalized, reason = exbind_scoring.normalize_reference(value, ref["output_keys"])
    assert (normalized is None) != (reason is None)
    if normalized is not None:
        assert list(normalized) == list(ref["output_keys"])
        assert all(type(v) is str and v and v == v.strip() for v in normalized.values())


@pytest.mark.parametrize("prediction", [None, 3, 2.5, float("nan"), b'{"id": "x"}', ["x"], {"cell_id": "x"}])
def test_non_string_predictions_are_unresolved(prediction):
    rec = score_prediction(prediction, REFERENCES[0])
    assert (rec["status"], rec["parse_path"], rec["first_violation"]) == ("unresolved", "failed", "candidate_valid")
    json.dumps(rec, allow_nan=False)


# A table reference (targeted compact) and its gold / a same-row other-column cell.
TABLE = next(i for i, r in enumerate(LOADED) if r["condition"] == "compact")


def _table_ids():
    ref = LOADED[TABLE]
    gold = ref["gold"]["cell_id"]
    row = int(gold[6:8])
    same_row = next(c["id"] for c in ref["candidates"] if c["row"] == row and c["id"] != gold)
    return gold, same_row


@pytest.mark.parametrize("template, expected", [
    ('{"cell_id": "%(gold)s", "cell_id": "%(other)s"}',
     ("unresolved", "strict", None, "conflicting duplicate key 'cell_id'")),
    ('{"cell_id": "%(gold)s", "cell_id": "%(gold)s"}', ("valid", "strict", "none", None)),
    ('{"id": "%(gold)s", "cell_id": "%(other)s"}', ("unresolved", "strict", None, "conflicting values for 'cell_id'")),
    ('{"cell_id": " %(gold)s\\n"}', ("valid", "strict", "none", None)),
    ('{"cell_id": "%(other)s"}', ("valid", "strict", "table_column", None)),
    ('{"cell_id": ' + "9" * 5000 + "}", ("unresolved", "failed", None, "no JSON object with a recognised key")),
    ('{"cell_id": NaN}', ("unresolved", "strict", None, "'cell_id' must be a non-empty string id")),
    ('{"cell_id": 1e400}', ("unresolved", "strict", None, "'cell_id' must be a non-empty string id")),
    ("[" * 100_000, ("unresolved", "failed", None, "no JSON object with a recognised key")),
    ('{"answer": {"cell_id": "%(gold)s"}}', ("unresolved", "strict", None, "missing key 'cell_id'")),
    ('Nested: {"answer": {"cell_id": "%(gold)s"}} ok', ("valid", "extracted", "none", None)),
    ('{"candidate_id": "%(gold)s"}', ("unresolved", "strict", None, "missing key 'cell_id'")),
    ('{"cell_id": "%(gold)s\ud800"}', ("invalid", "strict", None, None)),
    ('\ufeff{"cell_id": "%(gold)s"}', ("valid", "extracted", "none", None)),
    ('\uff5b"cell_id": "%(gold)s"\uff5d', ("unresolved", "failed", None, "no JSON object with a recognised key")),
    ('{"cell_id": "%(gold)s"}' + "}" * 5000, ("valid", "extracted", "none", None)),
    ('{"a": ' * 3000 + '{"cell_id": "%(gold)s"}' + "}" * 3000, ("valid", "extracted", "none", None)),
    ('{"cell_id": "%(gold)s".upper()}', ("unresolved", "failed", None, "no JSON object with a recognised key")),
], ids=["dup-conflict", "dup-equal", "alias-conflict", "whitespace", "other-column", "int-too-long", "nan",
        "inf", "deep-list", "nested-strict", "nested-prose", "candidate-id", "surrogate", "bom", "fullwidth",
        "trailing-braces", "deep-object", "python-expr"])
def test_hostile_outputs_exact_records(template, expected):
    gold, other = _table_ids()
    text = template % {"gold": gold, "other": other}
    rec = score_prediction(text, REFERENCES[TABLE])
    status, path, first, reason = expected
    assert (rec["status"], rec["parse_path"]) == (status, path)
    if first is not None:
        assert rec["first_violation"] == first
    if reason is not None:
        assert rec["reason"] == reason
    check_record(rec, REFERENCES[TABLE])


def test_same_row_other_column_scores_exactly():
    gold, other = _table_ids()
    rec = score_prediction(json.dumps({"cell_id": other}), REFERENCES[TABLE])
    assert rec["scores"] == {"candidate_valid": 1, "table_row": 1, "table_column": 0, "table_cell": 0, "exact": 0}
    assert rec["violations"] == ["table_column", "table_cell"]


def test_aggregate_of_hostile_outputs_is_plain_json():
    texts = ["", "[" * 100_000, '{"cell_id": NaN}', "9" * 5000, "\ud800", '{"cell_id": 1e400}']
    records = [score_prediction(t, REFERENCES[TABLE]) for t in texts]
    result = aggregate(records)
    check_aggregate(result, records)
    assert result["statuses"] == {"unresolved": 6}
    assert result["exact_accuracy"] == 0.0
    assert [round(x, 3) for x in result["exact_accuracy_ci"]] == [0.0, 0.390]
    assert result["stage_accuracy"]["table_row"] == {"correct": 0, "applicable": 6, "accuracy": 0.0}


# --------------------------------------------------------------------------- the evaluate metric


@pytest.fixture(scope="module")
def metric(tmp_path_factory):
    return evaluate.load(METRIC_PATH, cache_dir=str(tmp_path_factory.mktemp("robust-metric")),
                         experiment_id=uuid.uuid4().hex)


_VERSIONS = ("metric_version", "reference_schema", "generator_version")


@METRIC
@given(batch=cases(max_size=6, utf8_only=True))
def test_metric_never_raises_and_matches_core(metric, batch):
    texts = [t for t, _ in batch]
    refs = [r for _, r in batch]
    result = metric.compute(predictions=texts, references=refs, return_per_case=True)
    records = [score_prediction(t, r) for t, r in batch]
    assert result["per_case"] == records
    for rec, ref in zip(result["per_case"], refs):
        check_record(rec, ref)
    core = aggregate(records)
    assert {k: v for k, v in result.items() if k not in _VERSIONS and k != "per_case"} == core
    check_aggregate(result, records)
    assert result["reference_schema"] == REFERENCE_SCHEMA


def test_metric_hostile_outputs(metric):
    gold, other = _table_ids()
    texts = ["", "[" * 100_000, '{"cell_id": NaN}', "9" * 5000, '{"cell_id": "%s", "cell_id": "%s"}' % (gold, other),
             json.dumps({"cell_id": gold}), json.dumps({"cell_id": other}), "\x00\ufeff\u202e"]
    result = metric.compute(predictions=texts, references=[REFERENCES[TABLE]] * len(texts))
    json.dumps(result, allow_nan=False)
    assert result["statuses"] == {"unresolved": 6, "valid": 2}
    assert result["first_violation_counts"]["table_column"] == 1
    assert result["first_violation_counts"]["none"] == 1
    assert result["n_exact"] == 1


# --------------------------------------------------------------------------- bad references


def _payload(**changes) -> dict:
    payload = json.loads(REFERENCES[TABLE])
    for key, value in changes.items():
        if value is _DROP:
            payload.pop(key)
        else:
            payload[key] = value
    return payload


_DROP = object()


@pytest.mark.parametrize("reference, field", [
    ("not json at all", "not JSON"),
    ("", "not JSON"),
    ("[1, 2]", "`schema`"),
    ('"exbind.reference.v1"', "`schema`"),
    (json.dumps({"cell_id": "cell_r01_c01"}), "`schema`"),
    (json.dumps(_payload(schema="exbind.reference.v0")), "`schema`"),
    (json.dumps(_payload(schema="exbind.reference.v2")), "`schema`"),
    (json.dumps(_payload(schema=_DROP)), "`schema`"),
    (json.dumps(_payload(family="tables")), "`family`"),
    *[(json.dumps(_payload(**{name: _DROP})), f"`{name}`")
      for name in ("case_id", "format", "family", "output_keys", "gold", "declared_order",
                   "applicable_stages", "candidates", "target")],
])
def test_bad_reference_names_the_field(reference, field):
    with pytest.raises(ReferenceError) as info:
        score_prediction('{"cell_id": "cell_r01_c01"}', reference)
    assert field in str(info.value)


@pytest.mark.parametrize("reference", [None, 3, {"schema": REFERENCE_SCHEMA}, b"{}", ["x"]])
def test_non_string_reference_is_a_reference_error(reference):
    with pytest.raises(ReferenceError, match="reference"):
        score_prediction('{"cell_id": "cell_r01_c01"}', reference)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.one_of(st.text(max_size=30), _json_values(["x"]).map(lambda v: json.dumps(v, allow_nan=True))))
def test_arbitrary_text_reference_is_a_reference_error(reference):
    with pytest.raises(ReferenceError):
        score_prediction("{}", reference)


def test_metric_bad_reference_names_the_field(metric):
    bad = json.dumps(_payload(schema="exbind.reference.v0"))
    with pytest.raises(ValueError, match="`schema`"):  # exbind_scoring.ReferenceError of evaluate's copy
        metric.compute(predictions=['{"cell_id": "cell_r01_c01"}'], references=[bad])
    with pytest.raises(ValueError, match="`candidates` is missing"):
        metric.compute(predictions=["x"], references=[json.dumps(_payload(candidates=_DROP))])
    # the metric is usable afterwards
    assert metric.compute(predictions=["x"], references=[REFERENCES[TABLE]])["n"] == 1


@pytest.mark.parametrize("changes, field", [
    ({"candidates": [1, 2]}, "`candidates`"),
    ({"candidates": [{"type": "cell"}]}, "`candidates`"),
    ({"candidates": "cell_r01_c01"}, "`candidates`"),
    ({"candidates": []}, "`candidates`"),
    ({"family": ["table"]}, "`family`"),
    ({"family": "graph"}, "`family`"),
    ({"format": "html"}, "`format`"),
    ({"output_keys": "cell_id"}, "`output_keys`"),
    ({"output_keys": ["source_id", "target_id"]}, "`output_keys`"),
    ({"gold": {"cell_id": "cell_r99_c99"}}, "`gold`"),
    ({"gold": "cell_r01_c01"}, "`gold`"),
    ({"declared_order": ["candidate_valid", "exact"]}, "`declared_order`"),
    ({"applicable_stages": "table_row"}, "`applicable_stages`"),
    ({"target": None}, "`target`"),
    ({"target": {"row": "1", "column": "status", "entity": "x", "conditions": []}}, "`target.row`"),
    ({"format": ["table"]}, "`format`"),
], ids=lambda v: None if isinstance(v, str) else "-".join(f"{k}={str(x)[:12]}" for k, x in v.items()))
def test_malformed_reference_fields_name_the_field(changes, field):
    with pytest.raises(ReferenceError) as info:
        score_prediction('{"cell_id": "cell_r01_c01"}', json.dumps(_payload(**changes)))
    assert field in str(info.value)
