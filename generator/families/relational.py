"""Relational latent family: a small scene of coloured shapes on a latent grid (paper §3; SPEC §3-4).

One latent instance is a scene of 5-8 objects, each with a colour, a shape and a grid cell
``(col, row)`` (row 0 at the top, at most one object per cell), plus the target spec Y:
"the <colour> <shape> in the same column (row) <relation> the <anchor colour> <anchor shape>"
(same column or row, any distance: other objects may stand between target and anchor).

Correct by construction (SPEC §7 unique-gold and degeneracy gates):
- the anchor is the only object with its (colour, shape);
- exactly one object has the target (colour, shape) AND stands in the relation to the anchor
  (:func:`exbind_scoring.relation_holds`, the predicate the scorer uses);
- at least one other object has the target (colour, shape) but fails the relation (the
  same-attribute distractor; with probability 1/2 it sits on the opposite side of the anchor),
  so the attributes alone never single out the target;
- one object with other attributes stands in the relation (the relation decoy; half the time
  it shares the target's colour or shape).

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

# The opposite relation word: where the same-attribute distractor is preferably put.
_OPPOSITE = {"above": "below", "below": "above", "left_of": "right_of", "right_of": "left_of"}


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

        Used to hash latents for broad/targeted disjointness (SPEC §7). Objects are listed
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

    Templates cycle with period ``len(TEMPLATES)``; the relation cycles with period 4 and
    shifts by one per template cycle, so every 4 consecutive slots cover the 4 relations and
    every (template, relation) pair appears within ``4 * len(TEMPLATES)`` slots.
    """
    n_t = len(TEMPLATES)
    return RELATIONS[(slot + slot // n_t) % len(RELATIONS)], slot % n_t


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

    # Anchor with room for the target and a relation decoy on its ray.
    anchor_pos = rng.choice([p for p in _cells() if len(_ray(relation, p)) >= 2])
    ray = _ray(relation, anchor_pos)
    target_pos = rng.choice(ray)
    decoy_pos = rng.choice([p for p in ray if p != target_pos])
    off_ray = [p for p in _cells() if p != anchor_pos and p not in ray]
    opposite = [p for p in off_ray if relation_holds(_OPPOSITE[relation], p, anchor_pos)]
    if opposite and rng.random() < 0.5:
        distractor_pos = rng.choice(opposite)
    else:
        distractor_pos = rng.choice(off_ray)

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
        ("decoy", decoy_attrs, decoy_pos),
        ("distractor", target_attrs, distractor_pos),
    ]
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


def target_identifiable_by_attributes(latent: RelationalLatent) -> bool:
    """Degeneracy check (SPEC §7, CLEVR-style): True when the target's (colour, shape) alone
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
