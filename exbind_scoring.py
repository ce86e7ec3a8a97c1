"""ExBind core scorer: the one implementation of every scoring rule (SPEC §4, §11).

Pure Python over plain dicts. The ``evaluate`` wrapper (``exbind_metric.py``), the
build gates (``generator/gates.py``) and the reports all call these functions; there is no
second copy of a rule anywhere. This file imports only the standard library so that
``evaluate`` can copy it beside ``exbind_metric.py`` into its module cache.

Scoring one prediction (paper §3 eq. 3, A.3; SPEC §4):

1. :func:`parse_prediction`: strict JSON of the whole text, else the body of a code fence,
   else the last balanced JSON object in the text that has a recognised key; then the closed
   alias table :data:`ALIASES` maps keys to the format's output keys (``candidate_id`` is
   never an alias, so an echoed candidate row is not an answer).
2. Validity: every returned id must be in the case's candidate inventory.
3. Map through M_f^-1 (the reference's candidate meanings) and score every applicable
   structural stage 0/1 (:func:`stage_scores`); ``exact`` = surface reference equals gold.
4. Violation set = applicable structural stages scored 0; first violation = first member
   under the declared order, ``exact`` when only the surface reference differs, ``none``
   when exact; invalid/unresolved predictions have the set ``{candidate_valid}``.

A reference is the JSON string in every dataset row's ``reference`` field
(:data:`REFERENCE_SCHEMA`); see :func:`load_reference` for its keys.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Optional

REFERENCE_SCHEMA = "exbind.reference.v1"

STATUSES = ("valid", "invalid", "unresolved")
PARSE_PATHS = ("strict", "fenced", "extracted", "failed")

# Declared orders (SPEC §4 table; paper A.7). Validity first and exactness last, always.
DECLARED_ORDERS: dict[str, tuple[str, ...]] = {
    "relational": ("candidate_valid", "identity", "attribute", "anchor", "relation", "exact"),
    "hierarchy": ("candidate_valid", "identity", "hierarchy", "role", "attribute", "exact"),
    "graph": ("candidate_valid", "identity", "relation", "role", "exact"),
    "table": ("candidate_valid", "table_row", "table_column", "table_cell", "exact"),
}

FIRST_VIOLATION_LABELS = (
    "candidate_valid", "identity", "attribute", "anchor", "relation", "hierarchy", "role",
    "table_row", "table_column", "table_cell", "exact", "none",
)

# Canonical cross-family dimensions (paper Table 14): stage -> dimension.
CANONICAL_DIMENSION = {
    "candidate_valid": "candidate_valid",
    "identity": "identity",
    "table_row": "identity",
    "attribute": "attribute",
    "table_column": "attribute",
    "anchor": "anchor",
    "relation": "relation",
    "hierarchy": "hierarchy",
    "role": "ordered_role",
    "table_cell": "structured_selection",
    "exact": "exact",
}
CANONICAL_DIMENSIONS = (
    "candidate_valid", "identity", "attribute", "anchor", "relation", "hierarchy",
    "ordered_role", "structured_selection", "exact",
)

# Closed alias table (SPEC §4 step 1). Keys of a single-reference format accept these names;
# graph accepts "source"/"target". "candidate_id" is deliberately absent.
SINGLE_KEY_ALIASES = ("id", "element_id", "node_id", "target_id", "dom_id", "cell_id")
GRAPH_ALIASES = {
    "source_id": "source_id", "source": "source_id", "source_node_id": "source_id",
    "target_id": "target_id", "target": "target_id", "target_node_id": "target_id",
}

# Relation words (paper §3 R; SPEC §4 "one geometric predicate per relation word").
# Positions are latent grid cells (col, row); row grows downwards as in image space.
RELATIONS = ("above", "below", "left_of", "right_of")


def relation_holds(relation: str, position, anchor_position) -> bool:
    """Whether an object at ``position`` is *directly* <relation> the anchor.

    The same predicate serves the generator's uniqueness check and the scorer.

    Args:
        relation: one of :data:`RELATIONS`.
        position, anchor_position: ``(col, row)`` latent grid cells (ints); row 0 is the top.

    Returns:
        True for "above": same column, smaller row; "below": same column, larger row;
        "left_of": same row, smaller column; "right_of": same row, larger column.
        False when either position is missing or the relation is unknown.
    """
    if position is None or anchor_position is None:
        return False
    (c, r), (ac, ar) = position, anchor_position
    if relation == "above":
        return c == ac and r < ar
    if relation == "below":
        return c == ac and r > ar
    if relation == "left_of":
        return r == ar and c < ac
    if relation == "right_of":
        return r == ar and c > ac
    return False


_TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> set[str]:
    """Lower-cased alphanumeric tokens of ``text`` (the lexical gate's tokenizer)."""
    return set(_TOKEN.findall(text.lower())) if text else set()


# --------------------------------------------------------------------------- references


class ReferenceError(ValueError):
    """A ``reference`` value is not an ExBind reference; the message names the field."""


_REQUIRED_REFERENCE_FIELDS = (
    "schema", "case_id", "format", "family", "output_keys", "gold", "declared_order",
    "applicable_stages", "candidates", "target",
)


@functools.lru_cache(maxsize=8192)
def load_reference(reference: str) -> dict:
    """Parse and index one ``reference`` JSON string (cached: rows repeat across batches).

    Keys of the payload (SPEC §11): ``schema`` (== :data:`REFERENCE_SCHEMA`),
    ``generator_version``, ``case_id``,
    ``parent_case_id``, ``latent_id``, ``group_id``, ``suite``, ``format``, ``family``,
    ``condition``, ``output_keys``, ``gold``, ``declared_order``, ``applicable_stages``,
    ``candidates`` (list in released order; each ``{"id", "type", "semantic_id", "entity",
    "canonical", "text", ...}`` plus the family's fields ``attributes``, ``position``,
    ``group``, ``path``, ``role``, ``kind``, ``row``, ``column``, ``bbox``, ``roles``),
    ``target`` (the target spec), ``image_size`` (``[w, h]`` or null), ``gold_rank``.

    Returns:
        The payload dict plus ``_by_id`` ({candidate id: candidate}), ``_canonical``
        ({entity: canonical candidate id}) and ``_stages`` (applicable structural stages in
        declared order). Treat it as read-only: it is shared between calls.

    Raises:
        ReferenceError: when the string is not JSON, the schema is unknown, or a required
            field is missing; the message names the field and the fix.
    """
    if not isinstance(reference, str):
        raise ReferenceError(
            f"references: expected the dataset's `reference` JSON string, got {type(reference).__name__}; "
            "pass batch['reference'] from an ExBind config"
        )
    try:
        payload = json.loads(reference)
    except (ValueError, RecursionError) as exc:
        raise ReferenceError(
            f"references: not JSON ({exc}); pass the dataset's `reference` column unchanged"
        ) from None
    if not isinstance(payload, dict):
        raise ReferenceError("references: expected a JSON object with a `schema` field")
    schema = payload.get("schema")
    if schema != REFERENCE_SCHEMA:
        raise ReferenceError(
            f"reference field `schema` is {schema!r}, this scorer reads {REFERENCE_SCHEMA!r}; "
            "rebuild the dataset or use the metric version that matches it"
        )
    for name in _REQUIRED_REFERENCE_FIELDS:
        if name not in payload:
            raise ReferenceError(f"reference field `{name}` is missing (case {payload.get('case_id')!r})")
    family = payload["family"]
    if family not in DECLARED_ORDERS:
        raise ReferenceError(f"reference field `family` is {family!r}; expected one of {sorted(DECLARED_ORDERS)}")
    by_id = {c["id"]: c for c in payload["candidates"]}
    canonical = {c["entity"]: c["id"] for c in payload["candidates"] if c.get("canonical", True)}
    applicable = set(payload["applicable_stages"])
    payload["_by_id"] = by_id
    payload["_canonical"] = canonical
    payload["_stages"] = tuple(
        s for s in payload["declared_order"] if s in applicable and s not in ("candidate_valid", "exact")
    )
    return payload


# --------------------------------------------------------------------------- parsing


class _Pairs(dict):
    """JSON object that remembers keys given twice with different values."""

    conflicts: frozenset = frozenset()


def _object_pairs(pairs):
    obj = _Pairs()
    conflicts = set()
    for key, value in pairs:
        if key in obj and obj[key] != value:
            conflicts.add(key)
        obj[key] = value
    if conflicts:
        obj.conflicts = frozenset(conflicts)
    return obj


def _loads(text: str):
    """json.loads that never raises: returns (ok, value)."""
    try:
        return True, json.loads(text, object_pairs_hook=_object_pairs)
    except (ValueError, RecursionError, TypeError, MemoryError):
        return False, None


_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_MAX_EXTRACT_STARTS = 512


def _embedded_objects(text: str) -> list[tuple[int, Any]]:
    """Every JSON object that starts at a ``{`` of ``text``: ``[(end, value)]`` by end.

    Each of the last :data:`_MAX_EXTRACT_STARTS` ``{`` positions is decoded with
    ``json.JSONDecoder.raw_decode``, so a stray brace or quote in the prose before an
    answer never hides it (a hand-rolled brace/quote scanner loses its pairing there).
    Nested objects are all returned; ``end`` is the index just past the closing brace.
    """
    decoder = json.JSONDecoder(object_pairs_hook=_object_pairs)
    starts = [i for i, ch in enumerate(text) if ch == "{"][-_MAX_EXTRACT_STARTS:]
    found = []
    for start in starts:
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        found.append((end, value))
    found.sort(key=lambda item: item[0])
    return found


def recognised_keys(fmt: str) -> frozenset[str]:
    """Keys that make a JSON object count as an answer for format ``fmt``."""
    if fmt == "graph":
        return frozenset(GRAPH_ALIASES)
    return frozenset(SINGLE_KEY_ALIASES)


def parse_prediction(text: Any, fmt: str) -> tuple[Any, str]:
    """Find the JSON value a model output carries (SPEC §4 step 1).

    Args:
        text: raw model output (any value; non-strings parse as ``failed``).
        fmt: surface format, for the recognised keys of the extraction step.

    Returns:
        ``(value, parse_path)``: ``parse_path`` is ``"strict"`` (the whole text is JSON),
        ``"fenced"`` (the body of a code fence), ``"extracted"`` (the last balanced object
        with a recognised key) or ``"failed"`` (``value`` is None).
    """
    if not isinstance(text, str):
        return None, "failed"
    stripped = text.strip()
    ok, value = _loads(stripped)
    if ok:
        return value, "strict"
    for body in _FENCE.findall(text):
        ok, value = _loads(body.strip())
        if ok:
            return value, "fenced"
    keys = recognised_keys(fmt)
    for _end, value in reversed(_embedded_objects(text)):
        if isinstance(value, dict) and keys.intersection(value):
            return value, "extracted"
    return None, "failed"


def normalize_reference(value: Any, output_keys) -> tuple[Optional[dict], Optional[str]]:
    """Map a parsed JSON value to the format's output keys through the alias table.

    Args:
        value: what :func:`parse_prediction` returned.
        output_keys: the case's output keys, e.g. ``["cell_id"]`` or
            ``["source_id", "target_id"]``.

    Returns:
        ``(reference, None)`` with whitespace-stripped string ids, or ``(None, reason)``
        when the value is unresolved: not an object, a conflicting duplicate key, a
        required key missing, two aliases with different values, or a value that is not a
        non-empty string. Ids are case-sensitive and never repaired.
    """
    if not isinstance(value, dict):
        return None, f"expected a JSON object with {list(output_keys)}, got {type(value).__name__}"
    if len(output_keys) == 1:
        aliases = {k: output_keys[0] for k in SINGLE_KEY_ALIASES}
    else:
        aliases = GRAPH_ALIASES
    conflicts = getattr(value, "conflicts", frozenset())
    found: dict[str, str] = {}
    for key, raw in value.items():
        target_key = aliases.get(key)
        if target_key is None:
            continue
        if key in conflicts:
            return None, f"conflicting duplicate key {key!r}"
        if not isinstance(raw, str) or not raw.strip():
            return None, f"{key!r} must be a non-empty string id"
        ident = raw.strip()
        if target_key in found and found[target_key] != ident:
            return None, f"conflicting values for {target_key!r}"
        found[target_key] = ident
    missing = [k for k in output_keys if k not in found]
    if missing:
        return None, f"missing key {missing[0]!r}"
    return {k: found[k] for k in output_keys}, None


# --------------------------------------------------------------------------- stages


def _attrs(candidate: dict) -> dict:
    return candidate.get("attributes") or {}


def stage_scores(ref: dict, predicted: dict) -> dict[str, int]:
    """0/1 score of every applicable structural stage for a *valid* prediction.

    Args:
        ref: a loaded reference (:func:`load_reference`).
        predicted: normalized reference whose ids are all in the inventory.

    Returns:
        ``{stage: 0 | 1}`` for the applicable structural stages (not ``candidate_valid``
        or ``exact``), in declared order. Rules (SPEC §4): relational identity = same
        object, attribute = instructed colour/shape, anchor = not the anchor, relation =
        :func:`relation_holds` to the anchor; hierarchy identity = same group, hierarchy =
        same slot path, role, attribute = node kind; graph identity = same unordered
        endpoint set, relation = an edge with the instructed label joins them in either
        direction, role = ordered source/target; table row, column, cell.
    """
    family = ref["family"]
    target = ref["target"]
    by_id = ref["_by_id"]
    out: dict[str, int] = {}
    if family == "graph":
        s = by_id[predicted["source_id"]]["entity"]
        t = by_id[predicted["target_id"]]["entity"]
        for stage in ref["_stages"]:
            if stage == "identity":
                ok = {s, t} == {target["source"], target["target"]} and s != t
            elif stage == "relation":
                ok = s != t and any(
                    label == target["edge_label"] and {a, b} == {s, t} for a, b, label in target["edges"]
                )
            elif stage == "role":
                ok = s == target["source"] and t == target["target"]
            else:
                raise ReferenceError(f"reference field `applicable_stages` has {stage!r}, not a graph stage")
            out[stage] = int(ok)
        return out
    (key,) = ref["output_keys"]
    cand = by_id[predicted[key]]
    for stage in ref["_stages"]:
        if stage == "identity":
            if family == "hierarchy":
                ok = cand.get("group") == target.get("group")
            else:
                ok = cand["entity"] == target["entity"]
        elif stage == "attribute":
            if family == "hierarchy":
                ok = cand.get("kind") == target.get("kind")
            else:
                attrs = _attrs(cand)
                ok = all(attrs.get(k) == v for k, v in (target.get("attributes") or {}).items())
        elif stage == "anchor":
            ok = cand["entity"] != target.get("anchor")
        elif stage == "relation":
            ok = relation_holds(target.get("relation"), cand.get("position"), target.get("anchor_position"))
        elif stage == "hierarchy":
            ok = cand.get("path") == target.get("path")
        elif stage == "role":
            ok = cand.get("role") == target.get("role")
        elif stage == "table_row":
            ok = cand.get("row") == target.get("row")
        elif stage == "table_column":
            ok = cand.get("column") == target.get("column")
        elif stage == "table_cell":
            ok = cand.get("row") == target.get("row") and cand.get("column") == target.get("column")
        else:
            raise ReferenceError(f"reference field `applicable_stages` has unknown stage {stage!r}")
        out[stage] = int(ok)
    return out


def predicted_latent(ref: dict, predicted: dict) -> dict:
    """The latent objects a valid surface reference maps to through M_f^-1."""
    by_id = ref["_by_id"]
    if ref["family"] == "graph":
        return {"source": by_id[predicted["source_id"]]["entity"], "target": by_id[predicted["target_id"]]["entity"]}
    (key,) = ref["output_keys"]
    cand = by_id[predicted[key]]
    return {"entity": cand["entity"], "semantic_id": cand["semantic_id"]}


def _unscored(ref: dict, status: str, parse_path: str, reason: str, predicted=None) -> dict:
    scores = {"candidate_valid": 0}
    scores.update({s: 0 for s in ref["_stages"]})
    scores["exact"] = 0
    return _record(ref, status, parse_path, predicted, None, scores, ["candidate_valid"], "candidate_valid",
                   ["candidate_valid"], reason)


def _record(ref, status, parse_path, predicted, latent, scores, violations, first, possible, reason) -> dict:
    return {
        "case_id": ref["case_id"],
        "status": status,
        "parse_path": parse_path,
        "predicted": predicted,
        "predicted_latent": latent,
        "scores": scores,
        "violations": violations,
        "first_violation": first,
        "possible_first_violations": possible,
        "reason": reason,
        "format": ref["format"],
        "family": ref["family"],
        "condition": ref.get("condition"),
        "group_id": ref.get("group_id"),
        "parent_case_id": ref.get("parent_case_id"),
        "latent_id": ref.get("latent_id"),
        "generator_version": ref.get("generator_version"),
    }


def score_reference(ref: dict, predicted: Optional[dict], parse_path: str = "strict") -> dict:
    """Score a normalized surface reference (steps 2-5 of SPEC §4).

    Args:
        ref: a loaded reference (:func:`load_reference`).
        predicted: ``{output key: id}`` (already normalized), or None for unresolved.
        parse_path: recorded as is.

    Returns:
        The per-case record of SPEC §11: ``case_id``, ``status``, ``parse_path``,
        ``predicted``, ``predicted_latent``, ``scores`` (candidate_valid, every applicable
        stage and exact as 0/1 ints), ``violations`` (declared order), ``first_violation``,
        ``possible_first_violations`` (every violated stage can come first under some
        admissible order, so the list equals the violation set; ``["exact"]`` or
        ``["none"]`` when it is empty), ``reason``; plus ``format``, ``family``,
        ``condition``, ``group_id``, ``parent_case_id``, ``latent_id``, ``generator_version`` for
        aggregation.
    """
    if predicted is None:
        return _unscored(ref, "unresolved", parse_path, "no reference could be read")
    unknown = [v for v in predicted.values() if v not in ref["_by_id"]]
    if unknown:
        return _unscored(ref, "invalid", parse_path, f"id {unknown[0]!r} is not in the candidate inventory",
                         predicted)
    structural = stage_scores(ref, predicted)
    exact = int(predicted == ref["gold"])
    scores = {"candidate_valid": 1, **structural, "exact": exact}
    violations = [s for s in ref["_stages"] if structural[s] == 0]
    if violations:
        first = violations[0]
        possible = list(violations)
    else:
        first = "none" if exact else "exact"
        possible = [first]
    return _record(ref, "valid", parse_path, predicted, predicted_latent(ref, predicted), scores, violations,
                   first, possible, None)


def score_prediction(prediction: Any, reference: str) -> dict:
    """Score one raw model output against one ``reference`` string (never raises on output).

    Args:
        prediction: raw model output text (anything else is unresolved).
        reference: the dataset row's ``reference`` JSON string.

    Returns:
        The per-case record (see :func:`score_reference`).

    Raises:
        ReferenceError: only for a bad reference, never for a bad prediction.

    Example:
        >>> import json
        >>> # ref = load_reference(row["reference"]); score_prediction('{"cell_id": "cell_r01_c00"}', row["reference"])
    """
    ref = load_reference(reference)
    value, parse_path = parse_prediction(prediction, ref["format"])
    if parse_path == "failed":
        return _unscored(ref, "unresolved", parse_path, "no JSON object with a recognised key")
    predicted, reason = normalize_reference(value, ref["output_keys"])
    if predicted is None:
        return _unscored(ref, "unresolved", parse_path, reason)
    return score_reference(ref, predicted, parse_path)


# --------------------------------------------------------------------------- latent executor


def execute_target(ref: dict) -> list[dict]:
    """Run the target spec against the candidates' latent meanings (the structural oracle).

    Reads only ``target`` and the candidate meanings, never ``gold`` (SPEC §7).

    Returns:
        Every surface reference (``{output key: id}``) that satisfies the spec, in
        inventory order; the unique-gold gate requires exactly one.
    """
    family, target = ref["family"], ref["target"]
    cands = [c for c in ref["candidates"] if c.get("canonical", True)]
    if family == "graph":
        names = target.get("attributes") or {}
        edges = {tuple(e) for e in target["edges"]}
        src = [c for c in cands if _attrs(c).get("name") == names.get("source_name")]
        dst = [c for c in cands if _attrs(c).get("name") == names.get("target_name")]
        return [
            {"source_id": s["id"], "target_id": t["id"]}
            for s in src for t in dst
            if s["id"] != t["id"] and (s["entity"], t["entity"], target["edge_label"]) in edges
        ]
    (key,) = ref["output_keys"]
    if family == "relational":
        want = target.get("attributes") or {}
        hits = [
            c for c in cands
            if all(_attrs(c).get(k) == v for k, v in want.items())
            and c["entity"] != target.get("anchor")
            and relation_holds(target.get("relation"), c.get("position"), target.get("anchor_position"))
        ]
    elif family == "hierarchy":
        hits = [
            c for c in cands
            if c.get("group") == target.get("group") and c.get("path") == target.get("path")
            and c.get("role") == target.get("role") and c.get("kind") == target.get("kind")
        ]
    else:  # table
        rows: dict[int, dict[str, str]] = {}
        for c in cands:
            rows.setdefault(c.get("row"), {})[c.get("column")] = _attrs(c).get("value")
        matching = {r for r, values in rows.items() if all(values.get(col) == v for col, v in target.get("conditions") or [])}
        hits = [c for c in cands if c.get("row") in matching and c.get("column") == target.get("column")]
    return [{key: c["id"]} for c in hits]
