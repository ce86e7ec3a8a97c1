"""SVG surface compiler for the relational family (docs/specification.md §3; paper §4.2, Algorithm 1 steps 4-6).

``compile_svg(latent, rng)`` draws the scene as an SVG document (440 x 360 px, white
background rect without an id, no text). Each object is either

- a bare shape element with an id (the canonical reference), or
- a ``<g id=...>`` group with two child shapes that have their own ids: the body plus either
  an outline ring or an inner mark. The group is canonical (semantic id = entity); the
  children are ``f"{entity}.part1"`` (body) and ``f"{entity}.part2"`` (ring/mark),
  ``canonical=False``, same entity, attributes and position, so choosing a child is an
  exact-only failure (docs/specification.md §4 "exact").

The target is a group when ``latent.target_grouped``; other objects are groups with
probability 0.3, and when the target is a group at least one other object is too, so
group-ness never marks the target. Every element with an id is a candidate
(``svg_element``, text ``""``); ids are opaque (``e_xxxx``), each appears exactly once in the
document (its ``id`` attribute), and the inventory is a seeded shuffle.

Visible structure (docs/specification.md §6, issue 9): each candidate row carries the element's ``tag``
(``g``, ``rect``, ``circle``, ``polygon``) and ``parent_id`` (the enclosing group's id for a
child shape, else None), as a DOM inspector shows them. With the output contract "an object
is denoted by the outermost element that draws it" (stated in the prompt,
:data:`generator.prompt.FORMAT_CONTRACTS`), a group and its body child are told apart even
where their boxes coincide, and choosing the child stays a decidable exact-only failure.
"""

from __future__ import annotations

import random

from generator.families.relational import (
    COLORS,
    RelationalLatent,
    SceneObject,
    instruction_text,
    object_meaning,
    target_spec,
)
from generator.ids import opaque_ids
from generator.render import (
    BACKGROUND,
    BODY_STROKE,
    IMAGE_SIZE,
    INK,
    MARK_STROKE,
    RING_SCALE,
    RING_STROKE,
    cell_center,
    mark_outline,
    num,
    painted_bbox,
    shape_outline,
    union_bbox,
)
from generator.schema import Candidate, SurfaceCase

CANDIDATE_TYPE = "svg_element"
GROUP_PROBABILITY = 0.3  # chance that a non-target object is drawn as a group
GROUP_STYLES = ("ring", "mark")
SVG_NS = "http://www.w3.org/2000/svg"


def svg_shape(outline: tuple, paint: dict[str, object], element_id: str | None = None) -> str:
    """One SVG shape element for a render outline (see :mod:`generator.render`).

    Args:
        outline: ``("circle", cx, cy, r)``, ``("rect", x, y, w, h)`` or ``("polygon", pts)``.
        paint: presentation attributes in output order, e.g. ``{"fill": "#d62728",
            "stroke": "#333333", "stroke-width": 2, "stroke-linejoin": "round"}``.
        element_id: the ``id`` attribute, or None for none.

    Raises:
        ValueError: unknown outline kind.
    """
    kind = outline[0]
    attrs: list[tuple[str, object]] = [("id", element_id)] if element_id else []
    if kind == "circle":
        attrs += [("cx", outline[1]), ("cy", outline[2]), ("r", outline[3])]
    elif kind == "rect":
        attrs += [("x", outline[1]), ("y", outline[2]), ("width", outline[3]), ("height", outline[4])]
    elif kind == "polygon":
        attrs += [("points", " ".join(f"{x},{y}" for x, y in outline[1]))]
    else:
        raise ValueError(f"unknown outline kind {kind!r}")
    attrs += list(paint.items())
    body = " ".join(f'{k}="{num(v) if isinstance(v, float) else v}"' for k, v in attrs)
    return f"<{kind} {body}/>"


def svg_document(elements: list[str], size: tuple[int, int] = IMAGE_SIZE) -> str:
    """A complete SVG document: white background rect (no id) then ``elements`` in order."""
    w, h = size
    lines = [
        f'<svg xmlns="{SVG_NS}" width="{w}" height="{h}" viewBox="0 0 {w} {h}">',
        f'  <rect x="0" y="0" width="{w}" height="{h}" fill="{BACKGROUND}"/>',
    ]
    lines += [f"  {e}" for e in elements]
    lines.append("</svg>")
    return "\n".join(lines) + "\n"


def _body_paint(obj: SceneObject) -> dict[str, object]:
    return {"fill": COLORS[obj.color], "stroke": INK, "stroke-width": BODY_STROKE, "stroke-linejoin": "round"}


def _grouped_objects(latent: RelationalLatent, rng: random.Random) -> list[bool]:
    """Per object (latent order): drawn as a group? Target follows ``latent.target_grouped``."""
    grouped = [
        latent.target_grouped if i == latent.target_index else rng.random() < GROUP_PROBABILITY
        for i in range(len(latent.objects))
    ]
    others = [i for i in range(len(grouped)) if i != latent.target_index]
    if latent.target_grouped and not any(grouped[i] for i in others):
        grouped[rng.choice(others)] = True
    return grouped


def compile_svg(latent: RelationalLatent, rng: random.Random) -> SurfaceCase:
    """Compile a relational latent into an SVG case.

    Args:
        latent: from :func:`generator.families.relational.sample`.
        rng: the case's own RNG (grouping, styles, drawing order, ids, inventory order).

    Returns:
        A :class:`SurfaceCase` with ``format="svg"``, ``source_type="svg"``,
        ``source == render_svg`` (the SVG), ``image_size=(440, 360)`` and one candidate per
        element with an id; each candidate's ``bbox`` is its painted pixel box (a group's box
        is the union of its children's).
    """
    grouped = _grouped_objects(latent, rng)
    order = list(range(len(latent.objects)))
    rng.shuffle(order)  # drawing (document) order
    n_candidates = sum(3 if grouped[i] else 1 for i in order)
    ids = iter(opaque_ids(rng, "e", n_candidates))

    elements: list[str] = []
    candidates: list[Candidate] = []
    for i in order:
        obj = latent.objects[i]
        cx, cy = cell_center(obj.position)
        body = shape_outline(obj.shape, cx, cy)
        if not grouped[i]:
            eid = next(ids)
            elements.append(svg_shape(body, _body_paint(obj), eid))
            candidates.append(
                Candidate(eid, CANDIDATE_TYPE, "", object_meaning(obj), painted_bbox(body, BODY_STROKE),
                          tag=body[0])
            )
            continue
        gid, body_id, part_id = next(ids), next(ids), next(ids)
        if rng.choice(GROUP_STYLES) == "ring":
            part = shape_outline(obj.shape, cx, cy, RING_SCALE)
            part_paint = {"fill": "none", "stroke": INK, "stroke-width": RING_STROKE, "stroke-linejoin": "round"}
            part_stroke = RING_STROKE
        else:
            part = mark_outline(cx, cy)
            part_paint = {"fill": BACKGROUND, "stroke": INK, "stroke-width": MARK_STROKE, "stroke-linejoin": "round"}
            part_stroke = MARK_STROKE
        body_box = painted_bbox(body, BODY_STROKE)
        part_box = painted_bbox(part, part_stroke)
        elements.append(
            f'<g id="{gid}">{svg_shape(body, _body_paint(obj), body_id)}{svg_shape(part, part_paint, part_id)}</g>'
        )
        candidates += [
            Candidate(gid, CANDIDATE_TYPE, "", object_meaning(obj), union_bbox([body_box, part_box]), tag="g"),
            Candidate(body_id, CANDIDATE_TYPE, "", object_meaning(obj, f"{obj.entity}.part1"), body_box,
                      tag=body[0], parent_id=gid),
            Candidate(part_id, CANDIDATE_TYPE, "", object_meaning(obj, f"{obj.entity}.part2"), part_box,
                      tag=part[0], parent_id=gid),
        ]

    rng.shuffle(candidates)
    svg = svg_document(elements)
    return SurfaceCase(
        format="svg",
        instruction=instruction_text(latent),
        source_type="svg",
        source=svg,
        candidates=candidates,
        target=target_spec(latent),
        render_svg=svg,
        image_size=IMAGE_SIZE,
    )
