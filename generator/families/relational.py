"""Relational latent family: a small scene of coloured shapes on a latent grid (paper §3; docs/specification.md §3-4).

One latent instance is a scene of 5-8 objects, each with a colour, a shape and a grid cell
``(col, row)`` (row 0 at the top, at most one object per cell), plus the target spec Y:
"the <colour> <shape> in the same column (row) <relation> the <anchor colour> <anchor shape>"
(same column or row, any distance: other objects may stand between target and anchor).

Correct by construction (docs/specification.md §7 unique-gold and degeneracy gates):
- the anchor is the only object with its (colour, shape);
- exactly one object has the target (colour, shape) AND stands in the relation to the anchor
  (:func:`exbind_scoring.relation_holds`, the predicate the scorer uses);
- the relation is necessary (CLEVR-style degeneracy): a same-attribute distractor stands on
  the opposite side of the anchor on the same axis (same column for above/below, same row
  for left/right), so with the direction word removed ("the red circle in the same column
  as the blue square") at least two objects fit and only the direction decides. The
  (anchor, target, distractor) cells are drawn uniformly from all valid triples, so the
  target is nearer to the anchor as often as the distractor is;
- when the anchor's ray has a free cell, one object with other attributes stands in the
  relation (the relation decoy; half the time it shares the target's colour or shape).

Entities are ``f"{latent_id}_obj{k}"`` with ``k`` from 1, numbered in a seeded shuffle, so the
index says nothing about the role. The vocabularies and instruction templates are data
(``generator/data/relational.json``).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from exbind_scoring import RELATIONS, relation_holds
from generator.schema import Meaning, Target

_DATA_PATH = Path(__file__).resolve().parent.parent / "data" / "relational.json"
with _DATA_PATH.open(encoding="utf-8") as _fh:
    DATA: dict = json.load(_fh)

GRID_COLS: int = DATA["grid"]["cols"]
GRID_ROWS: int = DATA["grid"]["rows"]
COLORS: dict[str, str] = DATA["colors"]  # colour name -> fill hex
COLOR_NAMES: tuple[str, ...] = tuple(COLORS)
SHAPES: tuple[str, ...] = tuple(DATA["shapes"])
RELATION_PHRASES: dict[str, str] = DATA["relation_phrases"]
TEMPLATES: tuple[str, ...] = tuple(DATA["templates"])
N_OBJECTS_MIN: int = DATA["n_objects"]["min"]
N_OBJECTS_MAX: int = DATA["n_objects"]["max"]

# The opposite relation word: where the same-attribute distractor is put (docs/specification.md §7 degeneracy).
OPPOSITE: dict[str, str] = {"above": "below", "below": "above", "left_of": "right_of", "right_of": "left_of"}


@dataclass(frozen=True)
class SceneObject:
    """One scene object (a latent entity).

    Attributes:
        entity: ``f"{latent_id}_obj{k}"``, k from 1.
        color: a colour name of :data:`COLOR_NAMES`.
        shape: a shape name of :data:`SHAPES`.
        position: latent grid cell ``(col, row)``, ``0 <= col < GRID_COLS``,
            ``0 <= row < GRID_ROWS``; row 0 is the top.
    """

    entity: str
    color: str
    shape: str
    position: tuple[int, int]

    @property
    def attributes(self) -> tuple[tuple[str, str], ...]:
        """``(("color", c), ("shape", s))``: the sorted attribute tuple used in Meaning/Target."""
        return attribute_tuple(self.color, self.shape)


@dataclass(frozen=True)
class RelationalLatent:
    """A relational latent instance G (scene + target spec Y).

    Attributes:
        latent_id: the latent id (prefix of every entity and semantic id).
        grid_size: ``(cols, rows)`` of the latent grid.
        objects: the scene objects, ``objects[k-1].entity == f"{latent_id}_obj{k}"``.
        target_index: index into ``objects`` of the canonical target.
        anchor_index: index into ``objects`` of the anchor.
        relation: a word of :data:`exbind_scoring.RELATIONS`.
        template: index into :data:`TEMPLATES` (instruction phrasing).
        target_grouped: SVG presentation hint: draw the target as a ``<g>`` with two child
            shapes (so picking a child is an exact-only failure). Not latent content.
    """

    latent_id: str
    grid_size: tuple[int, int]
    objects: tuple[SceneObject, ...]
    target_index: int
    anchor_index: int
    relation: str
    template: int
    target_grouped: bool

    @property
    def target(self) -> SceneObject:
        return self.objects[self.target_index]

    @property
    def anchor(self) -> SceneObject:
        return self.objects[self.anchor_index]

    def canonical(self) -> dict:
        """JSON-serializable latent content without ids or presentation choices.

        Used to hash latents for broad/targeted disjointness (docs/specification.md §7). Objects are listed
        in entity order; the phrasing template and the SVG grouping hint are left out.
        """
        return {
            "family": "relational",
            "grid_size": list(self.grid_size),
            "objects": [
                {"color": o.color, "shape": o.shape, "position": list(o.position)} for o in self.objects
            ],
            "target": self.target_index,
            "anchor": self.anchor_index,
            "relation": self.relation,
        }


def attribute_tuple(color: str, shape: str) -> tuple[tuple[str, str], ...]:
    """The sorted ``(key, value)`` attribute tuple of a (colour, shape) pair."""
    return tuple(sorted({"color": color, "shape": shape}.items()))


def _cells() -> list[tuple[int, int]]:
    return [(c, r) for r in range(GRID_ROWS) for c in range(GRID_COLS)]


def _ray(relation: str, anchor_pos: tuple[int, int]) -> list[tuple[int, int]]:
    """Grid cells standing in ``relation`` to ``anchor_pos`` (row-major order)."""
    return [p for p in _cells() if relation_holds(relation, p, anchor_pos)]


def _pick_attrs(rng: random.Random, exclude: Iterable[tuple[str, str]]) -> tuple[str, str]:
    """A (colour, shape) pair drawn uniformly from those not in ``exclude``."""
    banned = set(exclude)
    pool = [(c, s) for c in COLOR_NAMES for s in SHAPES if (c, s) not in banned]
    return rng.choice(pool)


def balance_for_slot(slot: int) -> tuple[str, int]:
    """Deterministic (relation, template) for a case slot.

    Broad relational latents alternate: even slots compile to svg and canvas, odd slots to
    canvas only. Both fields are therefore driven by the pair index ``p = slot // 2``:
    template ``p % len(TEMPLATES)`` (so the svg rows, even slots, see every template, and
    the canvas rows see each template twice per cycle) and relation
    ``RELATIONS[(p + p // len(TEMPLATES) + 2 * (slot % 2)) % 4]`` (every 4 consecutive pairs
    cover the 4 relations; the shift by ``p // len(TEMPLATES)`` makes every (template,
    relation) pair appear within ``4 * len(TEMPLATES)`` even slots; odd slots are offset by
    two so the canvas-only latent of a pair asks the opposite direction).
    """
    n_t = len(TEMPLATES)
    pair = slot // 2
    return RELATIONS[(pair + pair // n_t + 2 * (slot % 2)) % len(RELATIONS)], pair % n_t


def relation_triples(relation: str) -> list[tuple[tuple[int, int], tuple[int, int], tuple[int, int]]]:
    """Every (anchor, target, distractor) cell triple of the relation-necessity rule.

    The target stands in ``relation`` to the anchor and the same-attribute distractor in
    ``OPPOSITE[relation]`` (same axis, other side), so dropping the direction word leaves
    both fitting. Row-major order; the sampler draws one uniformly.
    """
    return [(a, t, d) for a in _cells() for t in _ray(relation, a) for d in _ray(OPPOSITE[relation], a)]


def sample(rng: random.Random, latent_id: str, condition: Optional[str], slot: int) -> RelationalLatent:
    """Sample a relational latent that satisfies the family's construction rules.

    Args:
        rng: the case's own RNG (all randomness comes from it).
        latent_id: the latent id; entities are ``f"{latent_id}_obj{k}"``.
        condition: must be None (the relational family only appears in the broad suite).
        slot: the case index within its (suite, condition) cell; fixes relation, template
            (:func:`balance_for_slot`) and the SVG grouping hint (``(slot // 2) % 2 == 1``),
            so they are balanced across a suite.

    Raises:
        ValueError: on a non-None condition.
    """
    if condition is not None:
        raise ValueError(f"relational family has no condition {condition!r}; use None (broad suite)")
    relation, template = balance_for_slot(slot)
    n_objects = rng.randint(N_OBJECTS_MIN, N_OBJECTS_MAX)

    # Anchor, target and opposite-side same-attribute distractor (relation necessity).
    anchor_pos, target_pos, distractor_pos = rng.choice(relation_triples(relation))
    ray = _ray(relation, anchor_pos)
    decoy_room = [p for p in ray if p != target_pos]
    decoy_pos = rng.choice(decoy_room) if decoy_room else None

    target_attrs = (rng.choice(COLOR_NAMES), rng.choice(SHAPES))
    anchor_attrs = _pick_attrs(rng, [target_attrs])
    if rng.random() < 0.5:  # relation decoy shares one target attribute
        if rng.random() < 0.5:
            decoy_attrs = (target_attrs[0], rng.choice([s for s in SHAPES if s != target_attrs[1]]))
        else:
            decoy_attrs = (rng.choice([c for c in COLOR_NAMES if c != target_attrs[0]]), target_attrs[1])
        if decoy_attrs == anchor_attrs:
            decoy_attrs = _pick_attrs(rng, [target_attrs, anchor_attrs])
    else:
        decoy_attrs = _pick_attrs(rng, [target_attrs, anchor_attrs])

    placed: list[tuple[str, tuple[str, str], tuple[int, int]]] = [
        ("target", target_attrs, target_pos),
        ("anchor", anchor_attrs, anchor_pos),
        ("distractor", target_attrs, distractor_pos),
    ]
    if decoy_pos is not None:
        placed.append(("decoy", decoy_attrs, decoy_pos))
    used = {p for _, _, p in placed}
    free = [p for p in _cells() if p not in used]
    for pos in rng.sample(free, n_objects - len(placed)):
        # Fillers never copy the anchor; on the ray they never copy the target either.
        exclude = [anchor_attrs, target_attrs] if pos in ray else [anchor_attrs]
        placed.append(("filler", _pick_attrs(rng, exclude), pos))

    rng.shuffle(placed)
    objects = tuple(
        SceneObject(entity=f"{latent_id}_obj{k}", color=a[0], shape=a[1], position=p)
        for k, (_, a, p) in enumerate(placed, start=1)
    )
    roles = [role for role, _, _ in placed]
    latent = RelationalLatent(
        latent_id=latent_id,
        grid_size=(GRID_COLS, GRID_ROWS),
        objects=objects,
        target_index=roles.index("target"),
        anchor_index=roles.index("anchor"),
        relation=relation,
        template=template,
        target_grouped=(slot // 2) % 2 == 1,
    )
    assert len(objects_satisfying(latent)) == 1 and not target_identifiable_by_attributes(latent)
    assert len(objects_fitting_without_direction(latent)) >= 2
    return latent


def instruction_text(latent: RelationalLatent) -> str:
    """The natural-language instruction of the latent's template (never contains an id)."""
    t, a = latent.target, latent.anchor
    return TEMPLATES[latent.template].format(
        target=f"{t.color} {t.shape}",
        relation=RELATION_PHRASES[latent.relation],
        anchor=f"{a.color} {a.shape}",
    )


def objects_satisfying(latent: RelationalLatent) -> list[SceneObject]:
    """Latent executor: objects with the target's attributes standing in the relation to the anchor."""
    t, a = latent.target, latent.anchor
    return [
        o
        for o in latent.objects
        if o.entity != a.entity
        and o.attributes == t.attributes
        and relation_holds(latent.relation, o.position, a.position)
    ]


def objects_fitting_without_direction(latent: RelationalLatent) -> list[SceneObject]:
    """Objects that fit the instruction with the direction word removed (docs/specification.md §7 degeneracy).

    "the red circle in the same column as the blue square": the target's attributes on the
    relation's axis, either side of the anchor (:func:`exbind_scoring.relation_holds` with
    the relation or its ``OPPOSITE``). The sampler guarantees at least two, so the direction
    word is necessary.
    """
    t, a = latent.target, latent.anchor
    return [
        o
        for o in latent.objects
        if o.entity != a.entity
        and o.attributes == t.attributes
        and any(relation_holds(r, o.position, a.position) for r in (latent.relation, OPPOSITE[latent.relation]))
    ]


def target_identifiable_by_attributes(latent: RelationalLatent) -> bool:
    """Degeneracy check (docs/specification.md §7, CLEVR-style): True when the target's (colour, shape) alone
    singles it out, i.e. no same-attribute distractor exists. The sampler never produces one."""
    t = latent.target
    return sum(1 for o in latent.objects if o.attributes == t.attributes) == 1


def object_meaning(obj: SceneObject, semantic_id: Optional[str] = None) -> Meaning:
    """Meaning of a candidate denoting ``obj``.

    ``semantic_id`` None gives the canonical reference (semantic id = entity); a child shape
    passes ``f"{entity}.part{i}"`` and gets ``canonical=False`` with the object's attributes
    and position (it denotes the same entity).
    """
    return Meaning(
        semantic_id=semantic_id or obj.entity,
        entity=obj.entity,
        canonical=semantic_id is None,
        attributes=obj.attributes,
        position=obj.position,
    )


def target_spec(latent: RelationalLatent) -> Target:
    """The target spec Y: canonical target entity plus what the instruction states."""
    t, a = latent.target, latent.anchor
    return Target(
        semantic_id=t.entity,
        entity=t.entity,
        attributes=t.attributes,
        anchor=a.entity,
        anchor_position=a.position,
        relation=latent.relation,
    )
