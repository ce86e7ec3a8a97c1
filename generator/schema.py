"""Typed records shared by every latent family, surface compiler, gate and the builder.

The data path is a straight line (docs/specification.md §3, paper §3 eq. 2):

    latent instance G  --compile_<format>(latent, rng)-->  SurfaceCase X_f
    SurfaceCase        --records.build_record(...)------->  ExBindRecord (row + reference)

A compiler returns a :class:`SurfaceCase`: the observation O_f, the instruction I, the
candidate inventory C_f in *released order*, and the :class:`Target` spec Y. Each
:class:`Candidate` carries its model-visible fields and its evaluator-only
:class:`Meaning` (one entry of the latent-to-surface mapping M_f). The surface gold Y_f
is never written by a compiler: :func:`SurfaceCase.gold` derives it through M_f (the
candidate whose ``meaning.semantic_id`` equals the target's), so gold cannot drift from
the mapping.

Conventions (docs/specification.md §11):
- candidate ids are opaque (``e_7f3a``-style) except table cells, which use the visible
  position form ``cell_r{row:02d}_c{col:02d}`` (data rows from 1, columns from 0);
- ``Meaning.entity`` is the latent entity a candidate denotes (table: the row entity,
  graph: the node entity); ``Meaning.canonical`` marks the one candidate that is the
  entity's canonical surface reference (an SVG group, not its child shapes);
- bboxes are ``[x, y, width, height]`` in pixels of the rendered PNG.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

# The scorer owns the format contract; the generator imports it (one copy).
from exbind_scoring import FAMILY_OF_FORMAT, OUTPUT_KEYS  # noqa: E402

CANDIDATE_TYPE_OF_FORMAT: dict[str, str] = {
    "svg": "svg_element",
    "canvas": "canvas_object",
    "tree": "tree_node",
    "dom": "dom_element",
    "graph": "graph_node",
    "table": "cell",
}


@dataclass(frozen=True)
class Meaning:
    """Evaluator-only latent meaning of one surface candidate (one entry of M_f).

    Attributes:
        semantic_id: unique within the case, e.g. ``"<latent>_obj3"`` (an object),
            ``"<latent>_obj3.part1"`` (a child shape of that object),
            ``"<latent>_row_1.status"`` (a table cell), ``"<latent>_m2.b1.out"`` (a port).
        entity: latent entity the candidate denotes (relational: object; hierarchy: the
            node itself; graph: node; table: the row entity ``"<latent>_row_1"``).
        canonical: True for the entity's canonical surface reference.
        attributes: relational ``{"color", "shape"}``; graph ``{"name"}``;
            table ``{"value"}`` (the cell text); hierarchy ``{"name"}`` where named.
        position: relational latent grid position ``(col, row)``; None elsewhere.
        group: hierarchy group (module) entity id; None elsewhere.
        path: hierarchy ordinal path of the node's slot relative to its group root
            (1-based ordinals; a port shares the path of its block); None elsewhere.
        role: hierarchy role (``"input"``/``"output"``) or None.
        kind: hierarchy node kind (``"module"``, ``"block"``, ``"port"``, ...) or None.
        row: table data-row number (from 1); None elsewhere.
        column: table column name (e.g. ``"status"``); None elsewhere.
    """

    semantic_id: str
    entity: str
    canonical: bool = True
    attributes: tuple[tuple[str, str], ...] = ()
    position: Optional[tuple[int, int]] = None
    group: Optional[str] = None
    path: Optional[tuple[int, ...]] = None
    role: Optional[str] = None
    kind: Optional[str] = None
    row: Optional[int] = None
    column: Optional[str] = None


@dataclass
class Candidate:
    """One executable candidate: model-visible fields plus its evaluator-only meaning.

    Attributes:
        candidate_id: the surface reference a model returns.
        candidate_type: one of :data:`CANDIDATE_TYPE_OF_FORMAT` values.
        text: ``candidate_text`` (docs/specification.md §7): the element's visible text in the observation
            (cell content, node or element label; ``""`` for bare shapes).
        meaning: latent meaning (never shown to a model).
        bbox: ``[x, y, w, h]`` pixels in the rendered PNG for svg/canvas, else None.
        roles: graph endpoint role metadata (``["source", "target"]``), else None.
        tag: svg: the element's tag name (``"g"``, ``"rect"``, ``"circle"``, ``"polygon"``),
            as a DOM inspector shows it; None for other surfaces.
        parent_id: svg: the candidate id of the enclosing candidate element (a group's child
            shapes name the group), None for a top-level element and for other surfaces.
    """

    candidate_id: str
    candidate_type: str
    text: str
    meaning: Meaning
    bbox: Optional[list[float]] = None
    roles: Optional[list[str]] = None
    tag: Optional[str] = None
    parent_id: Optional[str] = None


@dataclass(frozen=True)
class Target:
    """The target spec Y (canonical semantic target plus what the instruction states).

    Only the fields of the case's family are set.
    - relational: ``semantic_id``, ``entity``, ``attributes`` (instructed colour/shape),
      ``anchor`` (anchor entity), ``anchor_position``, ``relation`` (a word of
      :data:`exbind_scoring.RELATIONS`).
    - hierarchy: ``semantic_id``, ``entity``, ``group``, ``path``, ``role``, ``kind``.
    - graph: ``source``/``target`` (node entities), ``source_semantic_id`` and
      ``target_semantic_id``, ``edge_label``, ``edges`` (every latent edge as
      ``(source_entity, target_entity, label)``), ``attributes`` may hold node names.
    - table: ``semantic_id``, ``entity`` (row entity), ``row``, ``column``,
      ``conditions`` (``((column, value), ...)`` the instruction states).
    """

    semantic_id: Optional[str] = None
    entity: Optional[str] = None
    attributes: tuple[tuple[str, str], ...] = ()
    anchor: Optional[str] = None
    anchor_position: Optional[tuple[int, int]] = None
    relation: Optional[str] = None
    group: Optional[str] = None
    path: Optional[tuple[int, ...]] = None
    role: Optional[str] = None
    kind: Optional[str] = None
    row: Optional[int] = None
    column: Optional[str] = None
    conditions: tuple[tuple[str, str], ...] = ()
    source: Optional[str] = None
    target: Optional[str] = None
    source_semantic_id: Optional[str] = None
    target_semantic_id: Optional[str] = None
    edge_label: Optional[str] = None
    edges: tuple[tuple[str, str, str], ...] = ()


@dataclass
class SurfaceCase:
    """What a surface compiler K_f returns: X_f = (O_f, I, C_f, Y_f, M_f) minus ids.

    Attributes:
        format: surface format (key of :data:`OUTPUT_KEYS`).
        instruction: natural-language instruction (never contains a candidate id).
        source_type: observation source type (``"svg"``, ``"canvas2d_js"``,
            ``"tree_outline"``, ``"html_dom"``, ``"graph_edges"``, ``"html_table"``).
        source: the serialized observation.
        candidates: inventory in released order (a seeded shuffle).
        target: the target spec.
        render_svg: for svg/canvas, the SVG document rasterized to the PNG (for canvas it
            is produced from the same scene command list as ``source``); else None.
        image_size: ``(width, height)`` pixels of the PNG, or None.
        scene: for canvas, the scene command list both program and PNG come from.
    """

    format: str
    instruction: str
    source_type: str
    source: str
    candidates: list[Candidate]
    target: Target
    render_svg: Optional[str] = None
    image_size: Optional[tuple[int, int]] = None
    scene: Optional[list] = field(default=None, repr=False)

    @property
    def family(self) -> str:
        return FAMILY_OF_FORMAT[self.format]

    def candidate_by_semantic_id(self, semantic_id: str) -> Candidate:
        """Apply M_f: the candidate whose meaning has ``semantic_id``.

        Raises:
            KeyError: when no candidate (or more than one) carries that semantic id.
        """
        found = [c for c in self.candidates if c.meaning.semantic_id == semantic_id]
        if len(found) != 1:
            raise KeyError(f"semantic id {semantic_id!r} maps to {len(found)} candidates, expected 1")
        return found[0]

    def gold(self) -> dict[str, str]:
        """Surface gold Y_f derived through the mapping M_f (never from the instruction)."""
        if self.format == "graph":
            return {
                "source_id": self.candidate_by_semantic_id(self.target.source_semantic_id).candidate_id,
                "target_id": self.candidate_by_semantic_id(self.target.target_semantic_id).candidate_id,
            }
        (key,) = OUTPUT_KEYS[self.format]
        return {key: self.candidate_by_semantic_id(self.target.semantic_id).candidate_id}
