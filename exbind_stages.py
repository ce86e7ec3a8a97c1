"""Stage scores, the per-case record and the latent executor (docs/specification.md §4 steps 2-5, §7, §11).

:func:`score_reference` scores a normalized surface reference: validity against the
candidate inventory, the 0/1 score of every applicable structural stage
(:func:`stage_scores`, paper §3 eq. 3 and A.3), exactness, the violation set and the first
violation under the declared order. :func:`execute_target` runs a target spec against the
candidates' latent meanings (the structural oracle of the build gates).
"""

from __future__ import annotations

from typing import Optional

try:  # inside evaluate's module cache the evaluator files sit in one package
    from .exbind_legacy_rules import legacy_hits, legacy_stage_scores
    from .exbind_vocabulary import LEGACY_FAMILY, ReferenceError, attrs as _attrs, relation_holds
except ImportError:  # imported from the repository root
    from exbind_legacy_rules import legacy_hits, legacy_stage_scores
    from exbind_vocabulary import LEGACY_FAMILY, ReferenceError, attrs as _attrs, relation_holds


def stage_scores(ref: dict, predicted: dict) -> dict[str, int]:
    """0/1 score of every applicable structural stage for a *valid* prediction.

    Args:
        ref: a loaded reference (:func:`load_reference`).
        predicted: normalized reference whose ids are all in the inventory.

    Returns:
        ``{stage: 0 | 1}`` for the applicable structural stages (not ``candidate_valid``
        or ``exact``), in declared order. Rules (docs/specification.md §4): relational identity = same
        object, attribute = instructed colour/shape, anchor = not the anchor, relation =
        :func:`relation_holds` to the anchor; hierarchy identity = same group, hierarchy =
        same slot path, role, attribute = node kind; graph identity = same unordered
        endpoint set, relation = an edge with the instructed label joins them in either
        direction, role = ordered source/target; table row, column, cell.

        Legacy (family ``"legacy"``, docs/specification.md §8; issue 6): the task type is ``target.kind``;
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
        return legacy_stage_scores(ref, by_id[predicted[key]])
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



def predicted_latent(ref: dict, predicted: dict) -> dict:
    """The latent objects a valid surface reference maps to through M_f^-1."""
    by_id = ref["_by_id"]
    if ref["family"] == "graph":
        return {"source": by_id[predicted["source_id"]]["entity"], "target": by_id[predicted["target_id"]]["entity"]}
    (key,) = ref["output_keys"]
    cand = by_id[predicted[key]]
    return {"entity": cand["entity"], "semantic_id": cand["semantic_id"]}


def unscored(ref: dict, status: str, parse_path: str, reason: str, predicted=None) -> dict:
    """The record of an ``invalid`` or ``unresolved`` case: violation set ``{candidate_valid}``,
    every applicable stage scored 0 (docs/specification.md §4 step 4), ``reason`` saying why."""
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
    """Score a normalized surface reference (steps 2-5 of docs/specification.md §4).

    Args:
        ref: a loaded reference (:func:`load_reference`).
        predicted: ``{output key: id}`` (already normalized), or None for unresolved.
        parse_path: recorded as is.

    Returns:
        The per-case record of docs/specification.md §11: ``case_id``, ``status``, ``parse_path``,
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
        return unscored(ref, "unresolved", parse_path, "no reference could be read")
    by_id = ref["_by_id"]
    for ident in predicted.values():
        if ident not in by_id:
            return unscored(ref, "invalid", parse_path, f"id {ident!r} is not in the candidate inventory",
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


def execute_target(ref: dict) -> list[dict]:
    """Run the target spec against the candidates' latent meanings (the structural oracle).

    Reads only ``target`` and the candidate meanings, never ``gold`` (docs/specification.md §7).

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
        return [{key: c["id"]} for c in legacy_hits(target, cands)]
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
