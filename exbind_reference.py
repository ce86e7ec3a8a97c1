"""Reading ExBind ``reference`` strings: parse, validate, index (SPEC §11).

:func:`load_reference` is the one entry point; it is cached because rows repeat across
batches, and it validates every field the scorer reads so that a bad reference raises
:class:`exbind_vocabulary.ReferenceError` naming the field, never a raw ``KeyError`` or
``TypeError`` later in scoring.
"""

from __future__ import annotations

import functools
import json

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
        validate_legacy_target(target, fail)
        task = target["kind"]
        if stages != list(LEGACY_APPLICABLE_STAGES[task]):
            fail("applicable_stages", f"must be {list(LEGACY_APPLICABLE_STAGES[task])} for a legacy {task} task")
        return
    for name, kind in _TARGET_FIELDS[family].items():
        if not isinstance(target.get(name), kind):
            fail(f"target.{name}", f"must be a {kind.__name__} for the {family} family")



load_reference.cache_clear = _load_reference.cache_clear  # type: ignore[attr-defined]
load_reference.cache_info = _load_reference.cache_info  # type: ignore[attr-defined]
