"""Legacy-bridge scoring rules (docs/specification.md §8; paper §6.5, A.14-A.15; issue 6).

Legacy SVG binding records (suite ``"legacy"``, format ``"svg"``, family ``"legacy"``) have
four task types (object, endpoint, edge, group), each applying its own subset of the
legacy declared order (:data:`exbind_vocabulary.LEGACY_APPLICABLE_STAGES`). This module
holds the three legacy rules: target-spec validation (:func:`validate_legacy_target`),
stage scores (:func:`legacy_stage_scores`, documented in
:func:`exbind_stages.stage_scores`) and the latent executor (:func:`legacy_hits`).
"""

from __future__ import annotations

try:  # inside evaluate's module cache the evaluator files sit in one package
    from .exbind_vocabulary import LEGACY_TASK_TYPES, ReferenceError, attrs as _attrs
except ImportError:  # imported from the repository root
    from exbind_vocabulary import LEGACY_TASK_TYPES, ReferenceError, attrs as _attrs

# Target-spec fields of each legacy task type (``kind`` is the task type).
_LEGACY_TARGET_FIELDS = {
    "object": {"entity": str},
    "endpoint": {"entity": str, "source": str, "target": str, "role": str},
    "edge": {"entity": str, "source": str, "target": str},
    "group": {"entity": str, "attributes": dict, "edges": list},
}


def validate_legacy_target(target: dict, fail) -> None:
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


def legacy_stage_scores(ref: dict, cand: dict) -> dict[str, int]:
    """The legacy rules of :func:`exbind_stages.stage_scores` for one candidate."""
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



def legacy_hits(target: dict, cands: list[dict]) -> list[dict]:
    """Candidates satisfying a legacy target spec (see :func:`exbind_stages.execute_target`)."""
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
