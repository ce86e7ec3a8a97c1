"""Rankings and clicks: the two non-reference prediction kinds (docs/specification.md §9; issue 4).

A ranking ``{"ranking": [...]}`` is scored through its top-1 and the gold rank
(:func:`score_ranking`, R@k and MRR in the aggregate); a click in an explicitly given
coordinate frame resolves to the smallest candidate box containing it and is scored as
that entity's canonical reference (:func:`score_click`, GUI-Primitives).
"""

from __future__ import annotations

import math
from typing import Any, Optional

try:  # inside evaluate's module cache the evaluator files sit in one package
    from .exbind_parse import is_number as _is_number
    from .exbind_stages import score_reference, unscored as _unscored
    from .exbind_vocabulary import RENDERED_FORMATS
except ImportError:  # imported from the repository root
    from exbind_parse import is_number as _is_number
    from exbind_stages import score_reference, unscored as _unscored
    from exbind_vocabulary import RENDERED_FORMATS


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
    """Score a ranked prediction ``{"ranking": [...]}`` (docs/specification.md §9; issue 4).

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
FRAME_EXTENT = {"pixel": None, "unit": 1.0, "thousand": 1000.0}


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


def _click_info(x_px=None, y_px=None, in_gold_box=False, loose_hit=False, klass="invalid", hit_id=None,
                outside_frame=False) -> dict:
    return {"x_px": x_px, "y_px": y_px, "in_gold_box": in_gold_box, "loose_hit": loose_hit, "class": klass,
            "hit_id": hit_id, "outside_frame": outside_frame}


def score_click(ref: dict, value: Any, parse_path: str = "strict", coordinate_frame: Optional[str] = None) -> dict:
    """Score a click prediction (docs/specification.md §9, GUI-Primitives; issue 4).

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
        anything else), ``"hit_id"`` (the candidate whose box was hit, or None),
        ``"outside_frame"`` (bool: the point was read but lies outside its frame; when most
        clicks of a run do, :func:`exbind_aggregate.click_summary` warns that they were
        probably given in another frame)``}``.
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
    extent = FRAME_EXTENT[coordinate_frame]
    fx, fy = float(x), float(y)
    ex, ey = (width, height) if extent is None else (extent, extent)
    if not (0.0 <= fx <= ex and 0.0 <= fy <= ey):
        reason = f"click ({x}, {y}) is outside the {coordinate_frame} frame [0, {ex:g}] x [0, {ey:g}]"
        return _click_record(_unscored(ref, "invalid", parse_path, reason, given), _click_info(outside_frame=True))
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
