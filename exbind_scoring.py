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

Three prediction kinds (SPEC §9; issue 4), told apart in one place,
:func:`prediction_kind`, from the shape of the parsed JSON:

- ``reference``: ``{"cell_id": ...}`` and every other object (the contract above, unchanged);
- ``ranking``: ``{"ranking": [ids...]}`` (graph: ordered endpoint pairs); its top-1 is scored
  as the reference and the gold candidate's rank gives R@k and MRR (:func:`score_ranking`);
- ``click``: ``{"x": .., "y": ..}``, ``{"point": [x, y]}`` or a bare ``[x, y]`` in an explicitly
  given coordinate frame; it resolves to the smallest candidate box containing it and is
  scored as that entity's canonical reference (:func:`score_click`).

A reference is the JSON string in every dataset row's ``reference`` field
(:data:`REFERENCE_SCHEMA`); see :func:`load_reference` for its keys.

The legacy bridge (SPEC §8; issue 6) adds family ``"legacy"`` (suite ``"legacy"``, format
``"svg"``, :data:`DECLARED_ORDERS` ``["legacy"]``) whose task types (object, endpoint, edge,
group) apply the stages of :data:`LEGACY_APPLICABLE_STAGES`; its rules are in
:func:`stage_scores` and :func:`execute_target`. Every other suite keeps
:data:`FAMILY_OF_FORMAT`.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any, Optional

REFERENCE_SCHEMA = "exbind.reference.v1"

STATUSES = ("valid", "invalid", "unresolved")
PARSE_PATHS = ("strict", "fenced", "extracted", "failed")

# Prediction kinds (per-case ``kind``), click coordinate frames and click classes (SPEC §9).
PREDICTION_KINDS = ("reference", "ranking", "click")
COORDINATE_FRAMES = ("pixel", "unit", "thousand")
CLICK_CLASSES = ("target", "distractor", "neither", "invalid")
RENDERED_FORMATS = ("svg", "canvas")
RANKING_CUTOFFS = (1, 5, 10)

# Declared orders (SPEC §4 table; paper A.7). Validity first and exactness last, always.
DECLARED_ORDERS: dict[str, tuple[str, ...]] = {
    "relational": ("candidate_valid", "identity", "attribute", "anchor", "relation", "exact"),
    "hierarchy": ("candidate_valid", "identity", "hierarchy", "role", "attribute", "exact"),
    "graph": ("candidate_valid", "identity", "relation", "role", "exact"),
    "table": ("candidate_valid", "table_row", "table_column", "table_cell", "exact"),
    "legacy": ("candidate_valid", "identity", "hierarchy", "relation", "role", "exact"),
}

# Legacy bridge (SPEC §8; issue 6): legacy SVG binding records (suite "legacy") keep format
# "svg" and use family "legacy"; each task type applies its own subset of the legacy order.
LEGACY_SUITE = "legacy"
LEGACY_FAMILY = "legacy"
LEGACY_FORMATS = ("svg",)
LEGACY_TASK_TYPES = ("object", "endpoint", "edge", "group")
LEGACY_APPLICABLE_STAGES: dict[str, tuple[str, ...]] = {
    "object": ("candidate_valid", "identity", "exact"),
    "endpoint": ("candidate_valid", "identity", "role", "exact"),
    "edge": ("candidate_valid", "identity", "relation", "role", "exact"),
    "group": ("candidate_valid", "identity", "hierarchy", "exact"),
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

# Output keys and family of every surface format (SPEC §3; paper A.4 "schema").
OUTPUT_KEYS: dict[str, tuple[str, ...]] = {
    "svg": ("target_id",),
    "canvas": ("target_id",),
    "tree": ("target_id",),
    "dom": ("dom_id",),
    "graph": ("source_id", "target_id"),
    "table": ("cell_id",),
}
FAMILY_OF_FORMAT: dict[str, str] = {
    "svg": "relational", "canvas": "relational", "tree": "hierarchy", "dom": "hierarchy",
    "graph": "graph", "table": "table",
}

# Relation words (paper §3 R; SPEC §4 "one geometric predicate per relation word").
# Positions are latent grid cells (col, row); row grows downwards as in image space.
RELATIONS = ("above", "below", "left_of", "right_of")


def relation_holds(relation: str, position, anchor_position) -> bool:
    """Whether an object at ``position`` is <relation> the anchor in the same column (row).

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
    if not isinstance(reference, str):  # checked before the cache: a dict is unhashable
        raise ReferenceError(
            f"references: expected the dataset's `reference` JSON string, got {type(reference).__name__}; "
            "pass batch['reference'] from an ExBind config"
        )
    return _load_reference(reference)


@functools.lru_cache(maxsize=8192)
def _load_reference(reference: str) -> dict:
    """The cached body of :func:`load_reference` (``reference`` is a str)."""
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
    _validate_reference(payload)
    by_id = {c["id"]: c for c in payload["candidates"]}
    canonical = {c["entity"]: c["id"] for c in payload["candidates"] if c.get("canonical", True)}
    applicable = set(payload["applicable_stages"])
    payload["_by_id"] = by_id
    payload["_canonical"] = canonical
    payload["_stages"] = tuple(
        s for s in payload["declared_order"] if s in applicable and s not in ("candidate_valid", "exact")
    )
    return payload


# Target-spec fields each family's stages and executor read (SPEC §11).
_TARGET_FIELDS = {
    "relational": {"entity": str, "attributes": dict, "anchor": str, "anchor_position": list, "relation": str},
    "hierarchy": {"entity": str, "group": str, "path": list, "kind": str},
    "graph": {"source": str, "target": str, "edge_label": str, "edges": list, "attributes": dict},
    "table": {"entity": str, "row": int, "column": str, "conditions": list},
}


def _validate_reference(payload: dict) -> None:
    """Check the structure the scorer relies on; raise :class:`ReferenceError` naming the field."""
    case = payload.get("case_id")

    def fail(field: str, problem: str):
        raise ReferenceError(f"reference field `{field}` {problem} (case {case!r}); "
                             "pass the dataset's `reference` column unchanged")

    fmt, family = payload["format"], payload["family"]
    if not isinstance(fmt, str) or fmt not in OUTPUT_KEYS:
        fail("format", f"is {fmt!r}; expected one of {sorted(OUTPUT_KEYS)}")
    legacy = family == LEGACY_FAMILY and fmt in LEGACY_FORMATS and payload.get("suite") == LEGACY_SUITE
    if not legacy and (not isinstance(family, str) or family != FAMILY_OF_FORMAT[fmt]):
        also = (f" (family {LEGACY_FAMILY!r} only with suite {LEGACY_SUITE!r} and format "
                f"{'/'.join(LEGACY_FORMATS)})") if family == LEGACY_FAMILY else ""
        fail("family", f"is {family!r}; format {fmt!r} belongs to {FAMILY_OF_FORMAT[fmt]!r}{also}")
    if payload["output_keys"] != list(OUTPUT_KEYS[fmt]):
        fail("output_keys", f"is {payload['output_keys']!r}; format {fmt!r} uses {list(OUTPUT_KEYS[fmt])}")
    if payload["declared_order"] != list(DECLARED_ORDERS[family]):
        fail("declared_order", f"differs from the {family} order {list(DECLARED_ORDERS[family])}")
    stages = payload["applicable_stages"]
    if not isinstance(stages, list) or not set(stages) <= set(DECLARED_ORDERS[family]):
        fail("applicable_stages", f"must be a list drawn from {list(DECLARED_ORDERS[family])}")
    cands = payload["candidates"]
    if not isinstance(cands, list) or not cands:
        fail("candidates", "must be a non-empty list of candidate objects")
    for c in cands:
        if not isinstance(c, dict) or not all(isinstance(c.get(k), str) for k in ("id", "type", "entity")):
            fail("candidates", "entries need string `id`, `type` and `entity`")
    ids = {c["id"] for c in cands}
    if len(ids) != len(cands):
        fail("candidates", "has duplicate ids")
    gold = payload["gold"]
    if (not isinstance(gold, dict) or list(gold) != list(OUTPUT_KEYS[fmt])
            or not all(isinstance(v, str) and v in ids for v in gold.values())):
        fail("gold", f"must map {list(OUTPUT_KEYS[fmt])} to candidate ids")
    target = payload["target"]
    if not isinstance(target, dict):
        fail("target", "must be an object (the target spec)")
    if legacy:
        _validate_legacy_target(target, fail)
        task = target["kind"]
        if stages != list(LEGACY_APPLICABLE_STAGES[task]):
            fail("applicable_stages", f"must be {list(LEGACY_APPLICABLE_STAGES[task])} for a legacy {task} task")
        return
    for name, kind in _TARGET_FIELDS[family].items():
        if not isinstance(target.get(name), kind):
            fail(f"target.{name}", f"must be a {kind.__name__} for the {family} family")


# Target-spec fields of each legacy task type (``kind`` is the task type).
_LEGACY_TARGET_FIELDS = {
    "object": {"entity": str},
    "endpoint": {"entity": str, "source": str, "target": str, "role": str},
    "edge": {"entity": str, "source": str, "target": str},
    "group": {"entity": str, "attributes": dict, "edges": list},
}


def _validate_legacy_target(target: dict, fail) -> None:
    """Fields of a legacy target spec (see :func:`stage_scores`); ``fail(field, problem)`` raises."""
    kind = target.get("kind")
    if kind not in LEGACY_TASK_TYPES:
        fail("target.kind", f"is {kind!r}; a legacy target's kind is one of {list(LEGACY_TASK_TYPES)}")
    for name, typ in _LEGACY_TARGET_FIELDS[kind].items():
        if not isinstance(target.get(name), typ):
            fail(f"target.{name}", f"must be a {typ.__name__} for a legacy {kind} task")
    if kind == "endpoint" and target["role"] not in ("source", "target"):
        fail("target.role", "must be 'source' or 'target' for a legacy endpoint task")
    if kind == "group":
        if not isinstance(target["attributes"].get("member"), str):
            fail("target.attributes.member", "must be the member node's entity for a legacy group task")
        if not all(isinstance(e, list) and len(e) == 3 and all(isinstance(v, str) for v in e)
                   for e in target["edges"]):
            fail("target.edges", "must be [child, parent, 'in'] containment triples for a legacy group task")


load_reference.cache_clear = _load_reference.cache_clear  # type: ignore[attr-defined]
load_reference.cache_info = _load_reference.cache_info  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- parsing


class _Pairs(dict):
    """JSON object that remembers keys given twice with different values."""

    conflicts: frozenset = frozenset()


def _object_pairs(pairs):
    obj = _Pairs(pairs)
    if len(obj) == len(pairs):  # no key given twice: nothing can conflict (the common case)
        return obj
    obj = _Pairs()
    conflicts = set()
    for key, value in pairs:
        if key in obj and obj[key] != value:
            conflicts.add(key)
        obj[key] = value
    if conflicts:
        obj.conflicts = frozenset(conflicts)
    return obj


# One decoder for every parse (json.loads with a hook builds a new one per call). Its C
# scanner is what json.loads runs; ``_loads`` requires it to consume the whole text, which
# is json.loads' rule for text without surrounding whitespace (callers strip or slice it).
_SCAN = json.JSONDecoder(object_pairs_hook=_object_pairs).scan_once


# The last character of any JSON text: a closing brace, bracket or quote, a digit, or the
# end of true/false, null, NaN, Infinity. Text ending otherwise cannot be JSON, which
# spares the scanner (and its exception) on prose and truncated answers.
_JSON_LAST_CHARS = frozenset('}]"0123456789elNy')


def _loads(text: str):
    """json.loads (duplicate-aware objects) of whitespace-free-edged text that never raises: (ok, value)."""
    if not text or text[-1] not in _JSON_LAST_CHARS:
        return False, None
    try:
        value, end = _SCAN(text, 0)
    except (StopIteration, ValueError, RecursionError, TypeError, MemoryError):
        return False, None
    if end != len(text):
        return False, None
    return True, value


_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_MAX_EXTRACT_STARTS = 256
_OPEN_BRACE = re.compile(r"\{")


def _embedded_objects(text: str) -> list[tuple[int, Any]]:
    """Every JSON value that starts at one of the last :data:`_MAX_EXTRACT_STARTS` ``{``.

    Returns ``[(end, value)]`` ordered by ``end`` (index just past the closing brace);
    nested objects are all listed. Each ``{`` is decoded on its own by the JSON scanner,
    so a stray brace or an odd quote in the prose before an answer cannot hide it (a
    brace/quote pairing scanner loses its state there, e.g. ``the "{" key; {"cell_id": ..}``).
    """
    starts = [m.start() for m in _OPEN_BRACE.finditer(text)][-_MAX_EXTRACT_STARTS:]
    found = []
    for start in starts:
        try:
            value, end = _SCAN(text, start)
        except (StopIteration, ValueError, RecursionError, TypeError, MemoryError):
            continue
        found.append((end, value))
    found.sort(key=lambda item: item[0])
    return found


_GRAPH_KEYS = frozenset(GRAPH_ALIASES)
_SINGLE_KEYS = frozenset(SINGLE_KEY_ALIASES)
_CLICK_KEYS = frozenset(("x", "y", "point"))
_KIND_KEYS = frozenset(("ranking",)) | _CLICK_KEYS


def recognised_keys(fmt: str) -> frozenset[str]:
    """Keys that make a JSON object count as an answer for format ``fmt``."""
    if fmt == "graph":
        return _GRAPH_KEYS
    return _SINGLE_KEYS


def parse_prediction(text: Any, fmt: str) -> tuple[Any, str]:
    """Find the JSON value a model output carries (SPEC §4 step 1).

    Args:
        text: raw model output (any value; non-strings parse as ``failed``).
        fmt: surface format, for the recognised keys of the extraction step.

    Returns:
        ``(value, parse_path)``: ``parse_path`` is ``"strict"`` (the whole text is JSON),
        ``"fenced"`` (the body of a code fence), ``"extracted"`` (the last balanced object
        with a recognised key of ``fmt``; when there is none, the last one with a
        ``ranking``, ``x``, ``y`` or ``point`` key) or ``"failed"`` (``value`` is None).
        A bare ``[x, y]`` click is read only as strict or fenced JSON.
    """
    if not isinstance(text, str):
        return None, "failed"
    ok, value = _loads(text.strip())
    if ok:
        return value, "strict"
    if "```" in text:
        for body in _FENCE.findall(text):
            ok, value = _loads(body.strip())
            if ok:
                return value, "fenced"
    if "{" not in text:
        return None, "failed"
    keys = _GRAPH_KEYS if fmt == "graph" else _SINGLE_KEYS
    objects = _embedded_objects(text)
    for _end, value in reversed(objects):
        if isinstance(value, dict) and not keys.isdisjoint(value):
            return value, "extracted"
    # Only when no object carries a reference key (so reference answers extract exactly as
    # before): the last object shaped as a ranking or a click.
    for _end, value in reversed(objects):
        if isinstance(value, dict) and not _KIND_KEYS.isdisjoint(value):
            return value, "extracted"
    return None, "failed"


# Alias table of each single-reference output key, built once (normalize_reference's hot path).
_SINGLE_ALIAS_TABLES = {key: {k: key for k in SINGLE_KEY_ALIASES} for key in ("target_id", "dom_id", "cell_id")}


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
        single = output_keys[0]
        if len(value) == 1 and not getattr(value, "conflicts", None):  # fast path: {"<alias>": "<id>"}
            ((key, raw),) = value.items()
            if key in _SINGLE_KEYS and isinstance(raw, str):
                ident = raw.strip()
                if ident:
                    return {single: ident}, None
        aliases = _SINGLE_ALIAS_TABLES.get(single) if isinstance(single, str) else None
        if aliases is None:
            aliases = {k: single for k in SINGLE_KEY_ALIASES}
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

        Legacy (family ``"legacy"``, SPEC §8; issue 6): the task type is ``target.kind``;
        candidates are SVG elements whose meanings come from the dot SVG (``kind`` ``node``,
        ``edge`` or ``cluster``; an edge's ``attributes`` ``source``/``target`` are its
        endpoint node entities). Rules:

        - object: identity = the candidate's entity is the instructed node.
        - endpoint (instructed edge A->B, role source or target): identity = the candidate
          is A or B (a node element); role = it is the instructed endpoint (A for source,
          B for target).
        - edge (instructed edge A->B): the candidate's endpoint set is {src, tgt} for an
          edge element, {name} for a node element, {} for a cluster; identity = that set is
          non-empty and a subset of {A, B}; relation = it is an edge element joining A and B
          in either direction (A != B); role = it is the edge A->B in the instructed
          direction.
        - group (the cluster containing X): identity = the candidate is on X's containment
          chain (X itself or any cluster containing X: ``target.attributes.member`` and the
          ``[child, parent, "in"]`` triples of ``target.edges``); hierarchy = it is the
          innermost cluster containing X (``target.entity``).

        Exact (outside this function) is the id equal to gold. So a reversed edge scores
        identity 1, relation 1, role 0; node A picked in an edge task identity 1, relation
        0; the other endpoint in an endpoint task identity 1, role 0; an outer cluster (or X
        itself) in a group task identity 1, hierarchy 0.
    """
    family = ref["family"]
    target = ref["target"]
    by_id = ref["_by_id"]
    out: dict[str, int] = {}
    if family == LEGACY_FAMILY:
        (key,) = ref["output_keys"]
        return _legacy_stage_scores(ref, by_id[predicted[key]])
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
    get, tget = cand.get, target.get
    hierarchy = family == "hierarchy"
    for stage in ref["_stages"]:
        if stage == "identity":
            ok = get("group") == tget("group") if hierarchy else cand["entity"] == target["entity"]
        elif stage == "attribute":
            if hierarchy:
                ok = get("kind") == tget("kind")
            else:
                attrs = get("attributes") or {}
                ok = True
                for k, v in (tget("attributes") or {}).items():
                    if attrs.get(k) != v:
                        ok = False
                        break
        elif stage == "anchor":
            ok = cand["entity"] != tget("anchor")
        elif stage == "relation":
            ok = relation_holds(tget("relation"), get("position"), tget("anchor_position"))
        elif stage == "hierarchy":
            ok = get("path") == tget("path")
        elif stage == "role":
            ok = get("role") == tget("role")
        elif stage == "table_row":
            ok = get("row") == tget("row")
        elif stage == "table_column":
            ok = get("column") == tget("column")
        elif stage == "table_cell":
            ok = get("row") == tget("row") and get("column") == tget("column")
        else:
            raise ReferenceError(f"reference field `applicable_stages` has unknown stage {stage!r}")
        out[stage] = 1 if ok else 0
    return out


def _legacy_endpoints(cand: dict) -> set:
    """Endpoint node entities of a legacy candidate: an edge's {source, target}, a node's {itself}."""
    kind = cand.get("kind")
    if kind == "edge":
        attrs = _attrs(cand)
        return {v for v in (attrs.get("source"), attrs.get("target")) if v is not None}
    if kind == "node":
        return {cand["entity"]}
    return set()


def _legacy_chain(target: dict) -> set:
    """The member node and every cluster on its containment chain (group tasks)."""
    chain = {(target.get("attributes") or {}).get("member")}
    chain.update(parent for _child, parent, _rel in target.get("edges") or ())
    chain.discard(None)
    return chain


def _legacy_stage_scores(ref: dict, cand: dict) -> dict[str, int]:
    """The legacy rules of :func:`stage_scores` for one candidate."""
    target = ref["target"]
    task = target.get("kind")
    entity, kind = cand["entity"], cand.get("kind")
    src, dst = target.get("source"), target.get("target")
    attrs = _attrs(cand)
    out: dict[str, int] = {}
    for stage in ref["_stages"]:
        if task == "object" and stage == "identity":
            ok = kind == "node" and entity == target["entity"]
        elif task == "endpoint" and stage == "identity":
            ok = kind == "node" and entity in (src, dst)
        elif task == "endpoint" and stage == "role":
            ok = kind == "node" and entity == (src if target.get("role") == "source" else dst)
        elif task == "edge" and stage == "identity":
            ends = _legacy_endpoints(cand)
            ok = bool(ends) and ends <= {src, dst}
        elif task == "edge" and stage == "relation":
            ok = kind == "edge" and src != dst and {attrs.get("source"), attrs.get("target")} == {src, dst}
        elif task == "edge" and stage == "role":
            ok = kind == "edge" and attrs.get("source") == src and attrs.get("target") == dst
        elif task == "group" and stage == "identity":
            ok = entity in _legacy_chain(target)
        elif task == "group" and stage == "hierarchy":
            ok = kind == "cluster" and entity == target["entity"]
        else:
            raise ReferenceError(f"reference field `applicable_stages` has {stage!r}, not a stage of a legacy {task} task")
        out[stage] = 1 if ok else 0
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
    scores = dict.fromkeys(("candidate_valid", *ref["_stages"], "exact"), 0)
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
        aggregation. A reference record has no ``kind`` key (its kind is ``"reference"``;
        the record schema of reference predictions is unchanged); :func:`score_ranking` and
        :func:`score_click` add ``kind``, ``rank_of_gold`` and ``click``.
    """
    if predicted is None:
        return _unscored(ref, "unresolved", parse_path, "no reference could be read")
    by_id = ref["_by_id"]
    for ident in predicted.values():
        if ident not in by_id:
            return _unscored(ref, "invalid", parse_path, f"id {ident!r} is not in the candidate inventory",
                             predicted)
    structural = stage_scores(ref, predicted)
    exact = 1 if predicted == ref["gold"] else 0
    scores = {"candidate_valid": 1, **structural, "exact": exact}
    violations = [s for s, ok in structural.items() if not ok]
    if violations:
        first = violations[0]
        possible = list(violations)
    else:
        first = "none" if exact else "exact"
        possible = [first]
    return _record(ref, "valid", parse_path, predicted, predicted_latent(ref, predicted), scores, violations,
                   first, possible, None)


def score_prediction(prediction: Any, reference: str, coordinate_frame: Optional[str] = None) -> dict:
    """Score one raw model output against one ``reference`` string (never raises on output).

    The parsed JSON's shape decides the kind (:func:`prediction_kind`): a reference is
    scored as in SPEC §4; a ranking by :func:`score_ranking`; a click by :func:`score_click`
    in ``coordinate_frame``.

    Args:
        prediction: raw model output text (anything else is unresolved).
        reference: the dataset row's ``reference`` JSON string.
        coordinate_frame: the frame click coordinates are given in: ``"pixel"`` (pixels
            of the rendered image, origin top-left), ``"unit"`` (0-1 of width and height)
            or ``"thousand"`` (0-1000); None when the run has no clicks (a click is then
            invalid, with a reason saying to pass the frame). Never guessed from magnitudes.

    Returns:
        The per-case record (see :func:`score_reference`).

    Raises:
        ReferenceError: only for a bad reference, never for a bad prediction.
        ValueError: when ``coordinate_frame`` is not None or one of :data:`COORDINATE_FRAMES`.

    Example:
        >>> import json
        >>> # ref = load_reference(row["reference"]); score_prediction('{"cell_id": "cell_r01_c00"}', row["reference"])
    """
    if coordinate_frame is not None and coordinate_frame not in _FRAME_EXTENT:
        raise ValueError(f"coordinate_frame must be one of {list(COORDINATE_FRAMES)} or None, "
                         f"got {coordinate_frame!r}")
    ref = load_reference(reference)
    value, parse_path = parse_prediction(prediction, ref["format"])
    if parse_path == "failed":
        return _unscored(ref, "unresolved", parse_path, "no JSON object with a recognised key")
    kind = prediction_kind(value, ref["format"])
    if kind == "ranking":
        return score_ranking(ref, value, parse_path)
    if kind == "click":
        return score_click(ref, value, parse_path, coordinate_frame)
    predicted, reason = normalize_reference(value, ref["output_keys"])
    if predicted is None:
        return _unscored(ref, "unresolved", parse_path, reason)
    return score_reference(ref, predicted, parse_path)


# --------------------------------------------------------------------------- prediction kinds


def _is_number(value: Any) -> bool:
    """A JSON number (int or float; a bool is not a number here)."""
    return type(value) is int or type(value) is float


def prediction_kind(value: Any, fmt: str) -> str:
    """The kind of a parsed prediction, from its JSON shape (the one place kinds are decided).

    Args:
        value: what :func:`parse_prediction` returned.
        fmt: the case's surface format.

    Returns:
        ``"reference"`` for an object with a recognised reference key of ``fmt``
        (:func:`recognised_keys`; such an object is a reference whatever else it holds, so
        reference scoring is unchanged); else ``"ranking"`` for an object with a
        ``ranking`` key; else ``"click"`` for an object with an ``x``, ``y`` or ``point``
        key, or a list of exactly two JSON numbers; else ``"reference"`` (which
        :func:`normalize_reference` then reads or declares unresolved).
    """
    if isinstance(value, dict):
        if not recognised_keys(fmt).isdisjoint(value):
            return "reference"
        if "ranking" in value:
            return "ranking"
        if not _CLICK_KEYS.isdisjoint(value):
            return "click"
        return "reference"
    if type(value) is list and len(value) == 2 and _is_number(value[0]) and _is_number(value[1]):
        return "click"
    return "reference"


# --------------------------------------------------------------------------- rankings


def _ranking_item(item: Any, graph: bool) -> Optional[tuple]:
    """One ranking item as a tuple of whitespace-stripped ids, or None when malformed.

    Single-key formats: a non-empty id string -> ``(id,)``. Graph: a ``[source_id,
    target_id]`` list of two non-empty strings or a ``"source_id->target_id"`` string
    (split at its one ``->``) -> ``(source_id, target_id)``.
    """
    if graph:
        if type(item) is list and len(item) == 2:
            parts = item
        elif isinstance(item, str) and item.count("->") == 1:
            parts = item.split("->")
        else:
            return None
        if not all(isinstance(p, str) and p.strip() for p in parts):
            return None
        return (parts[0].strip(), parts[1].strip())
    if isinstance(item, str) and item.strip():
        return (item.strip(),)
    return None


def read_ranking(ref: dict, value: dict) -> tuple[Optional[list], Optional[str], Optional[int]]:
    """Read a ``{"ranking": [...]}`` prediction against a loaded reference.

    Args:
        ref: a loaded reference (:func:`load_reference`).
        value: a parsed object with a ``ranking`` key (:func:`prediction_kind`).

    Returns:
        ``(items, reason, rank_of_gold)``. ``items`` is the list of readable items in
        submitted order (tuples of ids, see :func:`_ranking_item`), or None with
        ``reason`` when the ranking cannot be read: a conflicting duplicate ``ranking``
        key, a value that is not a non-empty list, or a malformed first item.
        ``rank_of_gold`` is the 1-based rank of the gold reference in the effective ranking:
        the submitted list with malformed items and items naming an id outside the
        inventory skipped, and every repeated item kept only at its first position (graph:
        ordered pairs, so the reversed pair is a different item). None when gold is absent
        or the first item names an unknown id (the ranking is then invalid, so it never
        counts as a hit and R@1 equals the top-1's exactness).
    """
    graph = ref["family"] == "graph"
    what = "[source_id, target_id] pairs or \"source_id->target_id\" strings" if graph else "candidate id strings"
    if "ranking" in getattr(value, "conflicts", ()):
        return None, "conflicting duplicate key 'ranking'", None
    raw = value["ranking"]
    if type(raw) is not list or not raw:
        return None, f"'ranking' must be a non-empty list of {what}", None
    items = [_ranking_item(item, graph) for item in raw]
    if items[0] is None:
        return None, f"ranking item 1 is not one of {what}", None
    by_id = ref["_by_id"]
    if any(i not in by_id for i in items[0]):
        return items, None, None
    gold = tuple(ref["gold"][k] for k in ref["output_keys"])
    seen: set = set()
    rank = 0
    for item in items:
        if item is None or item in seen or any(i not in by_id for i in item):
            continue
        seen.add(item)
        rank += 1
        if item == gold:
            return items, None, rank
    return items, None, None


def score_ranking(ref: dict, value: dict, parse_path: str = "strict") -> dict:
    """Score a ranked prediction ``{"ranking": [...]}`` (SPEC §9; issue 4).

    The first item is scored as the reference (:func:`score_reference`: its stage scores,
    violations and exactness; an unknown id there makes the case ``invalid``); the gold
    rank (:func:`read_ranking`) gives R@k and MRR in the aggregate
    (:func:`exbind_aggregate.ranking_summary`).

    Args:
        ref: a loaded reference (:func:`load_reference`).
        value: the parsed object (its ``ranking`` value: single-key formats a list of
            candidate ids; graph a list of ``[source_id, target_id]`` or
            ``"source_id->target_id"`` items).
        parse_path: recorded as is.

    Returns:
        The per-case record of :func:`score_reference` plus ``kind`` ``"ranking"``,
        ``rank_of_gold`` (int >= 1, or None when gold is absent or the ranking is invalid
        or unresolved) and ``click`` None. Unreadable rankings are ``unresolved`` with a
        ``reason``.
    """
    items, reason, rank = read_ranking(ref, value)
    if items is None:
        record = _unscored(ref, "unresolved", parse_path, reason)
    else:
        record = score_reference(ref, dict(zip(ref["output_keys"], items[0])), parse_path)
        if record["status"] == "invalid":
            record["reason"] = "ranking item 1: " + record["reason"]
    record["kind"] = "ranking"
    record["rank_of_gold"] = rank
    record["click"] = None
    return record


# --------------------------------------------------------------------------- clicks

# Extent of each coordinate frame (None: the image's own width and height, in pixels).
_FRAME_EXTENT = {"pixel": None, "unit": 1.0, "thousand": 1000.0}


def _finite(value: Any) -> Optional[float]:
    """A JSON number as a finite float, or None (NaN, infinities, ints too large, non-numbers)."""
    if not _is_number(value):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def read_click(value: Any) -> tuple[Optional[tuple], Optional[str]]:
    """The point of a click prediction as given, before any frame is applied.

    Args:
        value: ``{"x": .., "y": ..}``, ``{"point": [x, y]}`` or ``[x, y]`` (JSON numbers).

    Returns:
        ``((x, y), None)`` with the numbers as given (int or float, both finite), or
        ``(None, reason)``: a key given twice with different values, ``x``/``y`` and
        ``point`` both given and disagreeing, a coordinate missing, or one that is not a
        finite number (strings, booleans, NaN, infinities, integers beyond float range).
    """
    if isinstance(value, list):
        pair = value
    else:
        conflicts = getattr(value, "conflicts", ())
        for key in ("x", "y", "point"):
            if key in conflicts:
                return None, f"conflicting duplicate key {key!r}"
        pair = None
        if "point" in value:
            pair = value["point"]
            if type(pair) is not list or len(pair) != 2:
                return None, "'point' must be a list [x, y] of two numbers"
            if ("x" in value and value["x"] != pair[0]) or ("y" in value and value["y"] != pair[1]):
                return None, "'point' and 'x'/'y' disagree"
        elif "x" in value and "y" in value:
            pair = [value["x"], value["y"]]
        else:
            return None, "a click needs both 'x' and 'y' (or 'point': [x, y])"
    if _finite(pair[0]) is None or _finite(pair[1]) is None:
        return None, "click coordinates must be finite numbers"
    return (pair[0], pair[1]), None


def _box(candidate: dict) -> Optional[tuple]:
    """A candidate's ``bbox`` ``[x, y, w, h]`` (pixels) as floats, or None."""
    box = candidate.get("bbox")
    if type(box) is not list or len(box) != 4 or not all(_is_number(v) for v in box):
        return None
    return tuple(float(v) for v in box)


def _contains(box: tuple, x: float, y: float) -> bool:
    bx, by, bw, bh = box
    return bx <= x <= bx + bw and by <= y <= by + bh


def resolve_click(ref: dict, x_px: float, y_px: float) -> Optional[dict]:
    """The candidate a pixel point denotes: the smallest box containing it.

    Args:
        ref: a loaded reference of a rendered format.
        x_px, y_px: the point in pixels of the rendered image (origin top-left).

    Returns:
        The candidate (a reference candidate dict) whose ``bbox`` contains the point,
        edges inclusive, with the smallest area; ties go to the candidate first in the
        released order. None when no box contains the point.
    """
    best, best_area = None, None
    for cand in ref["candidates"]:
        box = _box(cand)
        if box is not None and _contains(box, x_px, y_px):
            area = box[2] * box[3]
            if best_area is None or area < best_area:
                best, best_area = cand, area
    return best


def _click_info(x_px=None, y_px=None, in_gold_box=False, loose_hit=False, klass="invalid", hit_id=None) -> dict:
    return {"x_px": x_px, "y_px": y_px, "in_gold_box": in_gold_box, "loose_hit": loose_hit, "class": klass,
            "hit_id": hit_id}


def score_click(ref: dict, value: Any, parse_path: str = "strict", coordinate_frame: Optional[str] = None) -> dict:
    """Score a click prediction (SPEC §9, GUI-Primitives; issue 4).

    Steps: read the point (:func:`read_click`; unreadable: ``unresolved``); only rendered
    formats (svg, canvas) take clicks; the frame must be given; the point must lie in its
    frame (``pixel``: ``[0, w] x [0, h]`` of ``image_size``; ``unit``: ``[0, 1]^2``;
    ``thousand``: ``[0, 1000]^2``; edges inclusive) and is mapped to pixels through
    ``image_size``; it resolves to the smallest candidate box containing it
    (:func:`resolve_click`), then to that candidate's latent entity, and is scored as that
    entity's canonical reference (:func:`score_reference`), so a click on any drawn part of
    a target that is an SVG group is exact. Each failed step makes the case ``invalid``
    (a point in no box too) with a ``reason``; ``predicted`` then holds the point as given
    (``{"x": x, "y": y}``, numbers, never candidate ids).

    Args:
        ref: a loaded reference (:func:`load_reference`).
        value: the parsed click (:func:`prediction_kind` said ``"click"``).
        parse_path: recorded as is.
        coordinate_frame: ``"pixel"``, ``"unit"``, ``"thousand"`` or None.

    Returns:
        The per-case record of :func:`score_reference` plus ``kind`` ``"click"``,
        ``rank_of_gold`` None and ``click``: ``{"x_px", "y_px"`` (floats in pixels; None unless the point lies in
        its frame), ``"in_gold_box"`` (bool: inside the gold candidate's box, edges
        inclusive), ``"loose_hit"`` (bool: within twice the gold box's diagonal of its
        centre), ``"class"`` (``"target"``: resolves to the gold entity; ``"distractor"``:
        to another entity; ``"neither"``: inside the image but in no box; ``"invalid"``:
        anything else), ``"hit_id"`` (the candidate whose box was hit, or None)``}``.
    """
    point, reason = read_click(value)
    if point is None:
        return _click_record(_unscored(ref, "unresolved", parse_path, reason), _click_info())
    x, y = point
    given = {"x": x, "y": y}
    fmt = ref["format"]
    if fmt not in RENDERED_FORMATS:
        schema = ", ".join(f'"{k}": "<id>"' for k in ref["output_keys"])
        reason = (f"clicks are scored only on rendered formats (svg, canvas); this {fmt} case needs a "
                  f"reference {{{schema}}}")
        return _click_record(_unscored(ref, "invalid", parse_path, reason, given), _click_info())
    if coordinate_frame is None:
        reason = ("no coordinate frame given for this click: pass coordinate_frame='pixel', 'unit' or "
                  "'thousand' (to score_prediction, or to the metric's add_batch / compute)")
        return _click_record(_unscored(ref, "invalid", parse_path, reason, given), _click_info())
    size = ref.get("image_size")
    if (type(size) is not list or len(size) != 2 or not all(_finite(v) is not None and v > 0 for v in size)):
        reason = "the reference has no image_size, so a click cannot be placed"
        return _click_record(_unscored(ref, "invalid", parse_path, reason, given), _click_info())
    width, height = float(size[0]), float(size[1])
    extent = _FRAME_EXTENT[coordinate_frame]
    fx, fy = float(x), float(y)
    ex, ey = (width, height) if extent is None else (extent, extent)
    if not (0.0 <= fx <= ex and 0.0 <= fy <= ey):
        reason = f"click ({x}, {y}) is outside the {coordinate_frame} frame [0, {ex:g}] x [0, {ey:g}]"
        return _click_record(_unscored(ref, "invalid", parse_path, reason, given), _click_info())
    x_px, y_px = (fx, fy) if extent is None else (fx * width / extent, fy * height / extent)
    by_id = ref["_by_id"]
    gold_cand = by_id[ref["gold"][ref["output_keys"][0]]]
    gold_box = _box(gold_cand)
    in_gold = gold_box is not None and _contains(gold_box, x_px, y_px)
    loose = False
    if gold_box is not None:
        gx, gy, gw, gh = gold_box
        loose = math.hypot(x_px - (gx + gw / 2), y_px - (gy + gh / 2)) <= 2 * math.hypot(gw, gh)
    hit = resolve_click(ref, x_px, y_px)
    if hit is None:
        reason = f"click at ({x_px:g}, {y_px:g}) px is in no candidate's box"
        record = _unscored(ref, "invalid", parse_path, reason, given)
        return _click_record(record, _click_info(x_px, y_px, in_gold, loose, "neither"))
    canonical = ref["_canonical"].get(hit["entity"], hit["id"])
    record = score_reference(ref, {ref["output_keys"][0]: canonical}, parse_path)
    klass = "target" if hit["entity"] == gold_cand["entity"] else "distractor"
    return _click_record(record, _click_info(x_px, y_px, in_gold, loose, klass, hit["id"]))


def _click_record(record: dict, info: dict) -> dict:
    record["kind"] = "click"
    record["rank_of_gold"] = None
    record["click"] = info
    return record


# --------------------------------------------------------------------------- latent executor


def execute_target(ref: dict) -> list[dict]:
    """Run the target spec against the candidates' latent meanings (the structural oracle).

    Reads only ``target`` and the candidate meanings, never ``gold`` (SPEC §7).

    Legacy tasks: object -> the node element of the instructed node; endpoint -> the node
    element of the instructed endpoint, provided an edge element A->B is a candidate; edge
    -> every edge element from A to B in the instructed direction (a multi-edge gives
    several, which the unique-gold gate rejects); group -> the cluster element that is the
    member's direct parent on its containment chain (``target.edges``).

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
    if family == LEGACY_FAMILY:
        return [{key: c["id"]} for c in _legacy_hits(target, cands)]
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


def _legacy_hits(target: dict, cands: list[dict]) -> list[dict]:
    """Candidates satisfying a legacy target spec (see :func:`execute_target`)."""
    task = target.get("kind")
    src, dst = target.get("source"), target.get("target")

    def is_edge(c: dict) -> bool:
        attrs = _attrs(c)
        return c.get("kind") == "edge" and attrs.get("source") == src and attrs.get("target") == dst

    if task == "object":
        return [c for c in cands if c.get("kind") == "node" and c["entity"] == target.get("entity")]
    if task == "endpoint":
        if not any(is_edge(c) for c in cands):
            return []
        want = src if target.get("role") == "source" else dst
        return [c for c in cands if c.get("kind") == "node" and c["entity"] == want]
    if task == "edge":
        return [c for c in cands if is_edge(c)]
    if task == "group":
        member = (target.get("attributes") or {}).get("member")
        parents = [parent for child, parent, _rel in target.get("edges") or () if child == member]
        return [c for c in cands if c.get("kind") == "cluster" and c["entity"] in parents]
    return []
