"""Reference validation is complete (issue 11 item 8; docs/specification.md §11).

Every field of a real reference of every family (relational, hierarchy, graph, table and
the four legacy task types) is replaced by values of the wrong shape or dropped; scoring
must then either work (records and the aggregate are plain JSON) or raise
``ReferenceError`` whose message names the mutated field, never a raw ``KeyError``,
``TypeError``, ``ValueError`` or ``AttributeError``. The sweep is exhaustive over a fixed
list of hostile values; a hypothesis property adds arbitrary JSON values at random paths.
"""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exbind_aggregate import aggregate
from exbind_scoring import ReferenceError, execute_target, load_reference, score_prediction
from composition.release import broad_plans, generate_latent
from generator.legacy import bridge


def _base_references() -> dict[str, dict]:
    """One reference payload per family and per legacy task type."""
    out: dict[str, dict] = {}
    for plan in broad_plans():
        if plan.family not in out:
            out[plan.family] = json.loads(generate_latent(plan).references[0])
    records, _ = bridge.bridge_records(render=False)
    for rec in records:
        payload = json.loads(rec.reference_json())
        out.setdefault("legacy_" + payload["target"]["kind"], payload)
    return out


BASES = _base_references()
DROP = object()
HOSTILE = [DROP, None, 0, -1, 1.5, True, "", "x", [], [None], [1, 2, 3], ["a", "b"], [["a", "b"]], {},
           {"a": [1]}, [[1, 2]]]


def _paths(payload: dict) -> list[tuple]:
    """Every field path worth mutating: top-level keys, target keys (one level deeper for
    lists and objects), every key of the first and of the gold candidate, their attributes."""
    paths = [(k,) for k in payload]
    for k, v in payload["target"].items():
        paths.append(("target", k))
        if isinstance(v, dict):
            paths += [("target", k, kk) for kk in v]
        elif isinstance(v, list) and v:
            paths.append(("target", k, 0))
    gold_id = next(iter(payload["gold"].values()))
    gold_index = next(i for i, c in enumerate(payload["candidates"]) if c["id"] == gold_id)
    for i in sorted({0, gold_index}):
        cand = payload["candidates"][i]
        paths.append(("candidates", i))
        for k, v in cand.items():
            paths.append(("candidates", i, k))
            if isinstance(v, dict):
                paths += [("candidates", i, k, kk) for kk in v]
            elif isinstance(v, list) and v:
                paths.append(("candidates", i, k, 0))
    paths += [("gold", k) for k in payload["gold"]]
    return paths


def _mutate(payload: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(payload)
    node = out
    for step in path[:-1]:
        node = node[step]
    if value is DROP:
        if isinstance(node, dict):
            node.pop(path[-1], None)
        else:
            del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


def _predictions(payload: dict) -> list[str]:
    """Gold, two other candidates, a ranking, a click and garbage, as model outputs."""
    keys = ["source_id", "target_id"] if payload.get("format") == "graph" else ["target_id"]
    ids = [c["id"] for c in payload["candidates"] if isinstance(c, dict) and isinstance(c.get("id"), str)][:3]
    outs = [json.dumps(payload["gold"]) if isinstance(payload.get("gold"), dict) else "{}"]
    outs += [json.dumps(dict.fromkeys(keys, i)) for i in ids]
    outs += [json.dumps({"cell_id": i}) for i in ids[:1]]
    outs.append(json.dumps({"ranking": [[i, i] if len(keys) == 2 else i for i in ids]}))
    outs += ['{"x": 0.5, "y": 0.5}', "no answer"]
    return outs


def _names(path: tuple) -> list[str]:
    """The names a message must carry for a mutation at ``path``."""
    head = str(path[0])
    if head == "target" and len(path) > 1:
        return [f"target.{path[1]}"]
    if head == "candidates" and len(path) > 2:
        return ["candidates", str(path[2])]
    return [head]


# A dropped or renamed gold candidate is reported as the gold id it no longer matches; a
# wrong format is reported as the family it contradicts (the message names both).
_ALSO_ACCEPTED = {"candidates": ["gold"], "format": ["family"]}


def _check(payload: dict, path: tuple) -> str:
    """Score every prediction against the mutated reference; return "scored" or "refused"."""
    reference = json.dumps(payload)
    try:
        ref = load_reference(reference)
        records = [score_prediction(p, reference, "unit") for p in _predictions(payload)]
        execute_target(ref)
        json.dumps(aggregate(records), allow_nan=False)
        json.dumps(records)
        return "scored"
    except ReferenceError as exc:
        message = str(exc)
        names = _names(path)
        alternatives = _ALSO_ACCEPTED.get(str(path[0]), [])
        assert all(n in message for n in names) or any(a in message for a in alternatives), (path, message)
        return "refused"


@pytest.mark.parametrize("base", sorted(BASES))
def test_every_field_of_every_family_scores_or_names_the_field(base):
    payload = BASES[base]
    outcomes = {"scored": 0, "refused": 0}
    for path in _paths(payload):
        for value in HOSTILE:
            outcomes[_check(_mutate(payload, path, value), path)] += 1
    # the unmutated reference scores, and the sweep refused a real share of the mutations
    assert _check(payload, ("schema",)) == "scored"
    assert outcomes["refused"] > 0 and outcomes["scored"] > 0


def test_the_reported_raw_errors_are_reference_errors():
    """The shapes that raised raw errors before (issue 11 item 8), one by one."""
    rel, graph = BASES["relational"], BASES["graph"]
    cases = [
        (_mutate(rel, ("candidates", 0, "semantic_id"), DROP), "semantic_id"),
        (_mutate(rel, ("candidates", 0, "position"), [1]), "position"),
        (_mutate(rel, ("candidates", 0, "attributes"), [1]), "attributes"),
        (_mutate(rel, ("target", "anchor_position"), []), "target.anchor_position"),
        (_mutate(graph, ("target", "edges"), [["a", "b"]]), "target.edges"),
        (_mutate(rel, ("applicable_stages",), [["identity"]]), "applicable_stages"),
        (_mutate(BASES["table"], ("target", "conditions"), [[["owner"], "x"]]), "target.conditions"),
        (_mutate(rel, ("group_id",), ["g"]), "group_id"),
    ]
    for payload, field in cases:
        with pytest.raises(ReferenceError, match=f"`[^`]*{field.split('.')[0]}"):
            score_prediction("{}", json.dumps(payload))
        with pytest.raises(ReferenceError) as info:
            score_prediction("{}", json.dumps(payload))
        assert field in str(info.value)


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=3),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                     max_leaves=6)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_arbitrary_values_at_any_field(data):
    base = data.draw(st.sampled_from(sorted(BASES)))
    payload = BASES[base]
    path = data.draw(st.sampled_from(_paths(payload)))
    value = data.draw(_JSON)
    _check(_mutate(payload, path, value), path)
