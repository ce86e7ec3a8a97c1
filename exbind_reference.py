"""Reading ExBind ``reference`` strings: parse, validate, index (docs/specification.md §11).

:func:`load_reference` is the one entry point; it is cached because rows repeat across
batches, and it validates every field the scorer reads so that a bad reference raises
:class:`exbind_vocabulary.ReferenceError` naming the field, never a raw ``KeyError`` or
``TypeError`` later in scoring.
"""

from __future__ import annotations

import functools
import json
import sys

try:  # inside evaluate's module cache the evaluator files sit in one package
    from .exbind_legacy_rules import validate_legacy_target
    from .exbind_vocabulary import (DECLARED_ORDERS, FAMILY_OF_FORMAT, LEGACY_APPLICABLE_STAGES, LEGACY_FAMILY,
                                    LEGACY_FORMATS, LEGACY_SUITE, OUTPUT_KEYS, REFERENCE_SCHEMA, ReferenceError)
except ImportError:  # imported from the repository root
    from exbind_legacy_rules import validate_legacy_target
    from exbind_vocabulary import (DECLARED_ORDERS, FAMILY_OF_FORMAT, LEGACY_APPLICABLE_STAGES, LEGACY_FAMILY,
                                   LEGACY_FORMATS, LEGACY_SUITE, OUTPUT_KEYS, REFERENCE_SCHEMA, ReferenceError)


_REQUIRED_REFERENCE_FIELDS = (
    "schema", "case_id", "format", "family", "output_keys", "gold", "declared_order",
    "applicable_stages", "candidates", "target",
)


def load_reference(reference: str) -> dict:
    """Parse and index one ``reference`` JSON string (cached: rows repeat across batches).

    Keys of the payload (docs/specification.md §11): ``schema`` (== :data:`REFERENCE_SCHEMA`),
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
        raise reference_type_error(reference)
    return _load_reference(reference)


def reference_type_error(reference) -> ReferenceError:
    """The error for a ``reference`` that is not a string (the same text wherever it is met)."""
    return ReferenceError(
        f"references: expected the dataset's `reference` JSON string, got {type(reference).__name__}; "
        "pass batch['reference'] from an ExBind config"
    )


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
        sys.intern(s) for s in payload["declared_order"] if s in applicable and s not in ("candidate_valid", "exact")
    )
    # Every record scored on this reference carries these strings; interned, equal ones are one
    # object across references, so aggregate's key comparisons stop at identity (issue 13 item 2).
    for name in ("format", "family", "condition"):
        if isinstance(payload.get(name), str):
            payload[name] = sys.intern(payload[name])
    return payload


# Target-spec fields each family's stages and executor read (docs/specification.md §11), with their checks.
def _is_pair(value) -> bool:
    """A ``[col, row]``-style pair of JSON numbers (bools excluded)."""
    return type(value) is list and len(value) == 2 and all(type(v) in (int, float) for v in value)


def _is_triples(value) -> bool:
    """A list of ``[a, b, label]`` string triples (graph edges, legacy containment)."""
    return type(value) is list and all(type(e) is list and len(e) == 3 and all(isinstance(v, str) for v in e)
                                       for e in value)


def _is_conditions(value) -> bool:
    """A list of ``[column, value]`` pairs whose column is a string (table conditions)."""
    return type(value) is list and all(type(c) is list and len(c) == 2 and isinstance(c[0], str) for c in value)


_STR = (lambda v: isinstance(v, str), "a string")
_DICT = (lambda v: isinstance(v, dict), "an object")
_LIST = (lambda v: type(v) is list, "a list")
_INT = (lambda v: type(v) is int, "an integer")
_TARGET_FIELDS = {
    "relational": {"entity": _STR, "attributes": _DICT, "anchor": _STR, "relation": _STR,
                   "anchor_position": (_is_pair, "a [col, row] pair of numbers")},
    "hierarchy": {"entity": _STR, "group": _STR, "path": _LIST, "kind": _STR},
    "graph": {"source": _STR, "target": _STR, "edge_label": _STR, "attributes": _DICT,
              "edges": (_is_triples, "a list of [source, target, label] string triples")},
    "table": {"entity": _STR, "row": _INT, "column": _STR,
              "conditions": (_is_conditions, "a list of [column, value] pairs")},
}
# Record fields copied into every per-case record and used as aggregation keys.
_OPTIONAL_TEXT_FIELDS = ("suite", "condition", "group_id", "parent_case_id", "latent_id", "generator_version")


def _validate_candidate(index: int, cand, family: str, fail) -> None:
    """One candidate's meaning fields (the ones the stages and the executor read)."""
    if not isinstance(cand, dict):
        fail("candidates", f"entry {index} is {type(cand).__name__}; each candidate is an object")
    for key in ("id", "type", "entity", "semantic_id"):
        if not isinstance(cand.get(key), str):
            fail("candidates", f"entry {index}: `{key}` must be a string, got {cand.get(key)!r}")
    where = f"entry {index} ({cand['id']!r})"
    if "canonical" in cand and not isinstance(cand["canonical"], bool):
        fail("candidates", f"{where}: `canonical` must be true or false")
    attrs = cand.get("attributes")
    if attrs is not None and not isinstance(attrs, dict):
        fail("candidates", f"{where}: `attributes` must be an object or null, got {type(attrs).__name__}")
    if family == "relational":
        pos = cand.get("position")
        if pos is not None and not _is_pair(pos):
            fail("candidates", f"{where}: `position` must be a [col, row] pair of numbers or null, got {pos!r}")
    elif family == "table":
        if type(cand.get("row")) is not int or not isinstance(cand.get("column"), str):
            fail("candidates", f"{where}: a table cell needs an integer `row` and a string `column`")
    elif family == LEGACY_FAMILY and attrs:
        for key in ("source", "target"):
            if attrs.get(key) is not None and not isinstance(attrs[key], str):
                fail("candidates", f"{where}: `attributes.{key}` must be an endpoint entity string or null")


def _validate_reference(payload: dict) -> None:
    """Check every field the scorer, the executor and the aggregate read.

    Raises :class:`ReferenceError` naming the field (``candidates`` entries by index and
    key, target fields as ``target.<name>``), so no later step meets a raw ``KeyError``,
    ``TypeError``, ``ValueError`` or ``AttributeError`` (issue 11 item 8).
    """
    case = payload.get("case_id")

    def fail(field: str, problem: str):
        raise ReferenceError(f"reference field `{field}` {problem} (case {case!r}); "
                             "pass the dataset's `reference` column unchanged")

    if not isinstance(case, str) or not case:
        fail("case_id", "must be a non-empty string")
    for name in _OPTIONAL_TEXT_FIELDS:
        if payload.get(name) is not None and not isinstance(payload[name], str):
            fail(name, f"must be a string or null, got {type(payload[name]).__name__}")
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
    if (type(stages) is not list or not all(isinstance(s, str) for s in stages)
            or not set(stages) <= set(DECLARED_ORDERS[family])):
        fail("applicable_stages", f"must be a list drawn from {list(DECLARED_ORDERS[family])}")
    cands = payload["candidates"]
    if type(cands) is not list or not cands:
        fail("candidates", "must be a non-empty list of candidate objects")
    for index, cand in enumerate(cands):
        _validate_candidate(index, cand, family, fail)
    ids = {c["id"] for c in cands}
    if len(ids) != len(cands):
        fail("candidates", "has duplicate ids")
    gold = payload["gold"]
    if not isinstance(gold, dict) or list(gold) != list(OUTPUT_KEYS[fmt]):
        fail("gold", f"must map {list(OUTPUT_KEYS[fmt])} to candidate ids")
    for key, ident in gold.items():
        if not isinstance(ident, str) or ident not in ids:
            fail("gold", f"must map {list(OUTPUT_KEYS[fmt])} to candidate ids; {key!r} is {ident!r}, "
                         "not a candidate id")
    target = payload["target"]
    if not isinstance(target, dict):
        fail("target", "must be an object (the target spec)")
    if legacy:
        validate_legacy_target(target, fail)
        task = target["kind"]
        if stages != list(LEGACY_APPLICABLE_STAGES[task]):
            fail("applicable_stages", f"must be {list(LEGACY_APPLICABLE_STAGES[task])} for a legacy {task} task")
        return
    for name, (check, what) in _TARGET_FIELDS[family].items():
        if not check(target.get(name)):
            fail(f"target.{name}", f"must be {what} for the {family} family, got {target.get(name)!r}")


load_reference.cache_clear = _load_reference.cache_clear  # type: ignore[attr-defined]
load_reference.cache_info = _load_reference.cache_info  # type: ignore[attr-defined]
