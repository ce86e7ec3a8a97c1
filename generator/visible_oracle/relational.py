"""Visible-oracle solver for the relational family (svg, canvas; see :mod:`generator.visible_oracle`).

It answers from what a model is shown and nothing else (docs/specification.md §7 "visible oracle"):

1. the instruction, parsed with the public vocabulary and templates of
   ``generator/data/relational.json`` (colour names, shape names, relation phrases);
2. the candidate rows: ``bbox`` for geometry, and for svg the visible structure ``tag`` and
   ``parent_id``; by the output contract (the outermost element that draws an object denotes
   it) only top-level rows (``parent_id`` null) denote objects;
3. the PNG pixels inside each top-level box: the colour is the palette colour (the public
   hex values) that most pixels match, the shape is read from that colour's mask
   (:func:`read_shape`).

Geometry comes from the boxes alone: box centres are clustered into columns and rows
(:func:`grid_positions`), so the one relation predicate the scorer and generator use,
:func:`exbind_scoring.relation_holds`, applies unchanged to the recovered ``(col, row)``.
The solver returns ``{"target_id": id}`` only when exactly one anchor matches the anchor
description and exactly one other object fits the target description and the relation;
otherwise None. It never raises on a well-formed row (missing image, unparsable
instruction or boxes give None).
"""

from __future__ import annotations

import json
import re
from typing import Optional

import numpy as np

from exbind_scoring import relation_holds
from generator.families.relational import DATA

COLORS: dict[str, tuple[int, int, int]] = {
    name: tuple(int(hexval[i:i + 2], 16) for i in (1, 3, 5)) for name, hexval in DATA["colors"].items()
}
SHAPES: tuple[str, ...] = tuple(DATA["shapes"])
RELATION_OF_PHRASE: dict[str, str] = {phrase: rel for rel, phrase in DATA["relation_phrases"].items()}

COLOR_TOLERANCE = 40.0  # max RGB distance of a pixel counted as a palette colour
MIN_COLOR_PIXELS = 60  # fewer matching pixels in a box: no object colour read
GRID_GAP_PX = 25.0  # box centres further apart than this start a new column (row)


def _alternation(words) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


def _template_pattern(template: str) -> re.Pattern:
    colour, shape = _alternation(COLORS), _alternation(SHAPES)
    pattern = re.escape(template)
    pattern = pattern.replace(re.escape("{target}"), f"(?P<target_color>{colour}) (?P<target_shape>{shape})")
    pattern = pattern.replace(re.escape("{relation}"), f"(?P<relation>{_alternation(RELATION_OF_PHRASE)})")
    pattern = pattern.replace(re.escape("{anchor}"), f"(?P<anchor_color>{colour}) (?P<anchor_shape>{shape})")
    return re.compile(pattern)


TEMPLATE_PATTERNS: tuple[re.Pattern, ...] = tuple(_template_pattern(t) for t in DATA["templates"])


def parse_instruction(instruction: str) -> Optional[dict]:
    """Read a relational instruction with the public templates and vocabulary.

    Returns:
        ``{"target": (colour, shape), "relation": word, "anchor": (colour, shape)}`` (relation
        a word of :data:`exbind_scoring.RELATIONS`), or None when no template matches.
    """
    for pattern in TEMPLATE_PATTERNS:
        m = pattern.fullmatch(instruction.strip())
        if m:
            return {
                "target": (m["target_color"], m["target_shape"]),
                "relation": RELATION_OF_PHRASE[m["relation"]],
                "anchor": (m["anchor_color"], m["anchor_shape"]),
            }
    return None


def read_color(pixels: np.ndarray) -> tuple[Optional[str], Optional[np.ndarray]]:
    """The palette colour most pixels of a crop match, and its boolean mask.

    Args:
        pixels: ``(h, w, 3)`` uint8 RGB crop (a candidate's box).

    Returns:
        ``(colour name, (h, w) mask)``; ``(None, None)`` when fewer than
        :data:`MIN_COLOR_PIXELS` pixels are within :data:`COLOR_TOLERANCE` of any palette
        colour (white background, ink outlines and anti-aliased blends match none).
    """
    flat = pixels.reshape(-1, 3).astype(np.float32)
    names = list(COLORS)
    palette = np.array([COLORS[n] for n in names], dtype=np.float32)
    dist = np.linalg.norm(flat[:, None, :] - palette[None, :, :], axis=2)
    nearest = dist.argmin(axis=1)
    close = dist[np.arange(len(flat)), nearest] <= COLOR_TOLERANCE
    counts = np.bincount(nearest[close], minlength=len(names))
    if counts.max(initial=0) < MIN_COLOR_PIXELS:
        return None, None
    best = int(counts.argmax())
    mask = (close & (nearest == best)).reshape(pixels.shape[:2])
    return names[best], mask


def read_shape(mask: np.ndarray) -> str:
    """Shape name of a filled body from its colour mask.

    Rules (bodies are drawn upright: squares axis-aligned, triangles point up, diamonds with
    corners on the axes; an inner mark may cut a hole in the middle):
    - fill ratio of the mask in its own bounding box >= 0.85: ``square`` (ideal 1.0);
    - >= 0.6: ``circle`` (ideal pi/4 = 0.785);
    - otherwise (ideal 0.5) the row extent at 85% of the height against the widest row:
      wide (>= 0.6) is a ``triangle`` (its base is at the bottom), narrow a ``diamond``.
    """
    ys, xs = np.nonzero(mask)
    y0, y1, x0, x1 = ys.min(), ys.max(), xs.min(), xs.max()
    fill = len(ys) / float((y1 - y0 + 1) * (x1 - x0 + 1))
    if fill >= 0.85:
        return "square"
    if fill >= 0.6:
        return "circle"
    row = mask[y0 + int(round(0.85 * (y1 - y0)))]
    cols = np.nonzero(row)[0]
    extent = (cols.max() - cols.min() + 1) if len(cols) else 0
    return "triangle" if extent >= 0.6 * (x1 - x0 + 1) else "diamond"


def _clusters(values: list[float]) -> list[int]:
    """Ordinal cluster index of each value: sorted values further apart than GRID_GAP_PX split."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    index, current, previous = [0] * len(values), 0, None
    for i in order:
        if previous is not None and values[i] - previous > GRID_GAP_PX:
            current += 1
        index[i] = current
        previous = values[i]
    return index


def grid_positions(boxes: list[list[int]]) -> list[tuple[int, int]]:
    """``(col, row)`` of each box: its centre's column and row cluster (left-to-right, top-down).

    Args:
        boxes: ``[x, y, w, h]`` pixel boxes of the objects.
    """
    cols = _clusters([x + w / 2.0 for x, _, w, _ in boxes])
    rows = _clusters([y + h / 2.0 for _, y, _, h in boxes])
    return list(zip(cols, rows))


def read_objects(candidates: list[dict], image) -> list[dict]:
    """Top-level candidates with the colour, shape and grid position read from the picture.

    Args:
        candidates: model-visible candidate rows (``candidate_id``, ``bbox``, optional
            ``parent_id``).
        image: PIL RGB image.

    Returns:
        ``[{"id", "color", "shape", "position"}]`` for every top-level candidate
        (``parent_id`` null); colour and shape None where the box shows no palette colour.
    """
    pixels = np.asarray(image if image.mode == "RGB" else image.convert("RGB"))
    top = [c for c in candidates if c.get("parent_id") is None and c.get("bbox")]
    positions = grid_positions([c["bbox"] for c in top])
    objects = []
    for cand, pos in zip(top, positions):
        x, y, w, h = (int(v) for v in cand["bbox"])
        crop = pixels[max(y, 0):y + h, max(x, 0):x + w]
        color, mask = read_color(crop) if crop.size else (None, None)
        objects.append({"id": cand["candidate_id"], "color": color,
                        "shape": read_shape(mask) if mask is not None else None, "position": pos})
    return objects


def solve(view: dict, image) -> dict | None:
    """Answer a relational case from the model-visible view and the PNG only.

    Args:
        view: :func:`generator.visible_oracle.visible_view` of a row (instruction, candidate
            rows, output schema).
        image: the row's PIL RGB image, or None.

    Returns:
        ``{<output key>: candidate_id}`` when exactly one anchor fits the anchor description
        and exactly one other top-level object has the target colour and shape and stands in
        the relation to it; None otherwise (undecidable from what the model sees).
    """
    if image is None:
        return None
    spec = parse_instruction(view.get("instruction") or "")
    if spec is None:
        return None
    (key,) = json.loads(view["output_schema"])
    objects = read_objects(view.get("candidates") or [], image)
    anchors = [o for o in objects if (o["color"], o["shape"]) == spec["anchor"]]
    if len(anchors) != 1:
        return None
    anchor = anchors[0]
    hits = [
        o for o in objects
        if o is not anchor and (o["color"], o["shape"]) == spec["target"]
        and relation_holds(spec["relation"], o["position"], anchor["position"])
    ]
    return {key: hits[0]["id"]} if len(hits) == 1 else None
