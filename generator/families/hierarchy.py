"""Hierarchy latent family: repeated-module hierarchies (paper §3-4, Tables 4-5; docs/specification.md §3-4, §6-7).

A latent instance is a design of *modules* (the groups) that share one identical internal
structure, so every slot (same ordinal path, role and kind) exists once in every module. Below
the module sit nested containers and leaf blocks; every block carries one input and one output
port and one role-less parameter node (document order: input, output, param)::

    depth 2:  module > block > port | param
    depth 3:  module > stage > block > port | param
    depth 4:  module > unit > stage > block > port | param

Depth conditions do not confound depth with inventory size (docs/specification.md §6): every depth draws its
skeleton from the same ``candidate_window`` of total node counts (34-52), with the same module
count (two), and breadth shrinks as depth grows (children per container: depth 2, 4-6 blocks;
depth 3, 2-3 stages of 1-3 blocks; depth 4, 2 units of 1-2 stages of 1-2 blocks). Every level
of a skeleton branches (:func:`branches_at_every_level`), so no ordinal of a path is trivial
everywhere.

On the targeted suite the candidate count is a function of the slot, not of the seed: the
case in slot ``s`` of a depth condition has ``targeted_candidate_counts[condition][s % 40]``
candidates (:func:`targeted_candidate_count`; the 2.0.0 release's own counts, medians 42, 46
and 48), and the skeleton is drawn within the window until its count matches. Every seed and
every scale therefore has the same count composition per depth, and the suite's depth balance
rule (median ratio <= 1.2) holds by construction rather than by luck of the seed; the skeleton
itself (which stages hold how many blocks) stays random.

The parameter node (kind ``"param"``, role None, its block's path, visible label the block's
parameter name from ``block_params``) is the one node that shares a *block* target's group, path
and role but not its kind, so choosing it violates exactly ``attribute`` (the hierarchy
attribute stage is reachable as a first violation, docs/specification.md §4).

The target is a port (or, on the broad suite only, sometimes a block). The instruction names the
group, the ordinal path below the module, the role and the node kind, so the declared hierarchy
order identity (group) -> hierarchy (path) -> role -> attribute (kind) -> exact applies (docs/specification.md §4).

Paths are tuples of 1-based ordinals among same-kind siblings in document order, relative to the
module root: a block in stage 2 at position 1 has path ``(2, 1)``; its ports and parameter
share the block's path; a module node has path ``()``. Semantic ids read
``f"{latent_id}_m2.s2.b1.out"`` (ports) and ``f"{latent_id}_m2.s2.b1.param"`` (parameters).

Vocabularies, structure sizes and instruction templates live in ``generator/data/hierarchy.json``.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional, Sequence

from generator.schema import Meaning, Target

DATA_PATH = Path(__file__).resolve().parent.parent / "data" / "hierarchy.json"

CONDITIONS = ("depth_2", "depth_3", "depth_4")
PORT_ROLES = ("input", "output")
# Semantic-id step per node kind (module steps are "m{i}", ports "in"/"out").
_ID_STEP = {"unit": "u", "stage": "s", "block": "b"}
_PORT_STEP = {"input": "in", "output": "out"}
PARAM_STEP = "param"
# Enough that the rarest targeted count (depth 3, 40 candidates: 1 draw in 18) is missed with
# probability (17/18)**2000 < 1e-49 per case.
_MAX_SHAPE_TRIES = 2000


@lru_cache(maxsize=1)
def vocabulary() -> dict:
    """The parsed ``generator/data/hierarchy.json`` (cached; treat as read-only)."""
    with open(DATA_PATH, encoding="utf-8") as fh:
        return json.load(fh)


@dataclass(frozen=True)
class HierarchyNode:
    """One node of a compiled hierarchy, in document order (one surface candidate per node).

    Attributes:
        semantic_id: e.g. ``"<latent>_m2"``, ``"<latent>_m2.s1.b2"``, ``"<latent>_m2.s1.b2.in"``,
            ``"<latent>_m2.s1.b2.param"``.
        kind: ``"module"``, ``"unit"``, ``"stage"``, ``"block"``, ``"port"`` or ``"param"``.
        group: the module entity (``"<latent>_m2"``); a module node's group is itself.
        path: 1-based ordinals below the module root (ports and params share their block's path).
        role: ``"input"``/``"output"`` for ports, else None.
        name: the visible name (modules, blocks, params), else None.
        level: nesting level, 0 for modules up to ``depth`` for ports and params.
    """

    semantic_id: str
    kind: str
    group: str
    path: tuple[int, ...]
    role: Optional[str]
    name: Optional[str]
    level: int

    def meaning(self) -> Meaning:
        """The evaluator-only :class:`Meaning` of this node (entity = the node itself)."""
        return Meaning(
            semantic_id=self.semantic_id,
            entity=self.semantic_id,
            canonical=True,
            attributes=(("name", self.name),) if self.name is not None else (),
            group=self.group,
            path=self.path,
            role=self.role,
            kind=self.kind,
        )


@dataclass(frozen=True)
class HierarchyLatent:
    """A repeated-module hierarchy with its target (the latent G of paper §3 for this family).

    Attributes:
        latent_id: case latent id; prefix of every semantic id.
        condition: ``"depth_2"``/``"depth_3"``/``"depth_4"`` (targeted suite) or None (broad).
        levels: node kinds from the module down to the block, e.g. ``("module", "stage", "block")``;
            ``len(levels)`` is the depth (2-4).
        module_names: visible module names in document order (3-4 of them).
        block_paths: every block slot of one module, in document order (lexicographic), e.g.
            ``((1, 1), (1, 2), (2, 1), (2, 2), (2, 3))``; identical in every module.
        block_names: visible block names aligned with ``block_paths`` (same in every module).
        target_module: 1-based index of the target's module.
        target_path: the target's ordinal path (one of ``block_paths``).
        target_kind: ``"port"`` or ``"block"``.
        target_role: ``"input"``/``"output"`` for a port target, None for a block target.
        template_index: index into the instruction templates for ``(target_kind, depth)``.
    """

    latent_id: str
    condition: Optional[str]
    levels: tuple[str, ...]
    module_names: tuple[str, ...]
    block_paths: tuple[tuple[int, ...], ...]
    block_names: tuple[str, ...]
    target_module: int
    target_path: tuple[int, ...]
    target_kind: str
    target_role: Optional[str]
    template_index: int

    @property
    def depth(self) -> int:
        """Number of levels from module to block (2, 3 or 4)."""
        return len(self.levels)

    def group_entity(self, module: int) -> str:
        """Entity id of module ``module`` (1-based), e.g. ``"<latent>_m2"``."""
        return f"{self.latent_id}_m{module}"

    def target_semantic_id(self) -> str:
        """Semantic id of the target node."""
        return _semantic_id(self.group_entity(self.target_module), self.levels, self.target_path, self.target_role)

    def skeleton(self) -> tuple:
        """The shape without names or target: ``(levels, module count, block_paths)``.

        Two latents with equal skeletons have the same candidate inventory up to labels.
        """
        return (self.levels, len(self.module_names), self.block_paths)

    def canonical(self) -> dict:
        """JSON-serializable content without latent id or surface ids (broad/targeted hash, docs/specification.md §7).

        The condition is deliberately left out: two latents with the same content hash alike
        whatever suite they came from.
        """
        return {
            "family": "hierarchy",
            "levels": list(self.levels),
            "module_names": list(self.module_names),
            "block_paths": [list(p) for p in self.block_paths],
            "block_names": list(self.block_names),
            "target": {
                "module": self.target_module,
                "path": list(self.target_path),
                "kind": self.target_kind,
                "role": self.target_role,
            },
            "template_index": self.template_index,
        }


def _semantic_id(group: str, levels: Sequence[str], path: Sequence[int], role: Optional[str]) -> str:
    steps = [f"{_ID_STEP[levels[k + 1]]}{ordinal}" for k, ordinal in enumerate(path)]
    if role is not None:
        steps.append(_PORT_STEP[role])
    return ".".join([group, *steps])


def _depth_of(condition: Optional[str], slot: int) -> int:
    if condition is None:
        # broad: depths 2, 3, 4 in turn over pairs of slots, so the even (tree + dom) and the odd
        # (tree-only) slots both cover every depth
        return 2 + (slot // 2) % 3
    if condition not in CONDITIONS:
        raise ValueError(f"unknown hierarchy condition {condition!r}; expected None or one of {CONDITIONS}")
    return int(condition.split("_")[1])


def targeted_candidate_count(condition: str, slot: int) -> int:
    """The total candidate count of the targeted case in ``slot`` of a depth ``condition``:
    ``targeted_candidate_counts[condition][slot % 40]`` of ``hierarchy.json``.

    Args:
        condition: ``"depth_2"``, ``"depth_3"`` or ``"depth_4"``.
        slot: the case's index (>= 0) within its condition; every run of 40 consecutive slots
            starting at a multiple of 40 has the same counts, so any ``scale`` keeps the medians.

    Raises:
        ValueError: for an unknown condition or a negative slot.
    """
    if condition not in CONDITIONS:
        raise ValueError(f"unknown hierarchy condition {condition!r}; expected one of {CONDITIONS}")
    if isinstance(slot, bool) or not isinstance(slot, int) or slot < 0:
        raise ValueError(f"slot must be a non-negative integer, got {slot!r}")
    counts = vocabulary()["targeted_candidate_counts"][condition]
    return counts[slot % len(counts)]


def _sample_block_paths(
    rng: random.Random, children: Sequence[Sequence[int]]
) -> tuple[tuple[int, ...], ...]:
    """Block slots of one module: every level-``k`` container gets ``randint(*children[k])``
    children (``k = 0`` is the module); ``len(children)`` levels sit below the module."""

    def expand(prefix: tuple[int, ...]) -> list[tuple[int, ...]]:
        low, high = children[len(prefix)]
        out: list[tuple[int, ...]] = []
        for ordinal in range(1, rng.randint(low, high) + 1):
            path = prefix + (ordinal,)
            out.extend([path] if len(path) == len(children) else expand(path))
        return out

    return tuple(expand(()))


def branches_at_every_level(block_paths: Sequence[tuple[int, ...]]) -> bool:
    """Whether some container at every level below the module root (the module included) has
    two or more children, so that every ordinal of a path can matter."""
    n_below = len(block_paths[0])
    for k in range(n_below):
        children: dict[tuple[int, ...], set[int]] = {}
        for p in block_paths:
            children.setdefault(p[:k], set()).add(p[k])
        if max(len(c) for c in children.values()) < 2:
            return False
    return True


def nodes_per_module(block_paths: Sequence[tuple[int, ...]]) -> int:
    """Node count of one module: the module, its containers, and each block with two ports and
    one parameter (4 nodes per block)."""
    containers = {p[:k] for p in block_paths for k in range(1, len(p))}
    return 1 + len(containers) + 4 * len(block_paths)


def param_name(block_name: str) -> str:
    """The visible parameter name of a block (``block_params`` in the data; same in every module).

    Raises:
        KeyError: if ``block_name`` has no parameter name in ``hierarchy.json``.
    """
    return vocabulary()["block_params"][block_name]


def _module_names(rng: random.Random, n: int) -> tuple[str, ...]:
    vocab = vocabulary()
    fmt = vocab["module_name_format"]
    if rng.random() < 0.5:  # a consecutive run of letters, e.g. Module C, D, E
        letters = vocab["module_letters"]
        start = rng.randrange(len(letters) - n + 1)
        raw = letters[start : start + n]
    else:
        raw = rng.sample(vocab["module_words"], n)
    return tuple(fmt.format(name=x) for x in raw)


def sample(rng: random.Random, latent_id: str, condition: Optional[str], slot: int) -> HierarchyLatent:
    """Sample one repeated-module hierarchy and its target.

    Args:
        rng: the case's own RNG (the only randomness used).
        latent_id: prefix of every semantic id.
        condition: ``"depth_2"``, ``"depth_3"``, ``"depth_4"`` (targeted) or None (broad: depth
            ``2 + (slot // 2) % 3``, so even and odd slots both cover depths 2-4; every fifth
            slot targets a block instead of a port).
        slot: the case's index within its (suite, condition) cell; balances the target role
            (alternating input/output) and the instruction template.

    Returns:
        A :class:`HierarchyLatent` whose total node count stays within the depth's
        ``candidate_window`` (34-52 nodes at every depth: breadth shrinks as depth grows),
        equals :func:`targeted_candidate_count` on the targeted suite, and whose skeleton
        branches at every level (:func:`branches_at_every_level`).

    Raises:
        ValueError: for an unknown condition.
        RuntimeError: if no such shape is found (data misconfiguration).
    """
    vocab = vocabulary()
    depth = _depth_of(condition, slot)
    cfg = vocab["depths"][str(depth)]
    low, high = vocab["candidate_window"]
    # The slot's count only narrows which draw is accepted: where the first in-window draw already
    # has it (every targeted case of the 2.0.0 release), the case is unchanged.
    wanted = None if condition is None else targeted_candidate_count(condition, slot)
    for _ in range(_MAX_SHAPE_TRIES):
        n_modules = rng.randint(cfg["modules"][0], cfg["modules"][1])
        block_paths = _sample_block_paths(rng, cfg["children"])
        total = n_modules * nodes_per_module(block_paths)
        if (low <= total <= high and branches_at_every_level(block_paths)
                and (wanted is None or total == wanted)):
            break
    else:
        window = f"{low}-{high}" if wanted is None else str(wanted)
        raise RuntimeError(f"no depth-{depth} shape with {window} nodes in {_MAX_SHAPE_TRIES} draws; "
                           "check hierarchy.json")

    if condition is None:
        kind = "block" if slot % 5 == 4 else "port"
        role = PORT_ROLES[(slot // 2) % 2] if kind == "port" else None
        turn = slot // 4
    else:
        kind = "port"
        role = PORT_ROLES[slot % 2]
        turn = slot // 2
    n_templates = len(vocab["templates"][kind][str(depth)])

    return HierarchyLatent(
        latent_id=latent_id,
        condition=condition,
        levels=tuple(cfg["levels"]),
        module_names=_module_names(rng, n_modules),
        block_paths=block_paths,
        block_names=tuple(rng.sample(vocab["block_names"], len(block_paths))),
        target_module=rng.randint(1, n_modules),
        target_path=rng.choice(block_paths),
        target_kind=kind,
        target_role=role,
        template_index=turn % n_templates,
    )


def nodes(latent: HierarchyLatent) -> list[HierarchyNode]:
    """Every node in document (pre-)order: module, containers, block, its two ports, its param.

    The list has ``len(module_names) * nodes_per_module(block_paths)`` entries; each becomes one
    candidate of the tree and DOM surfaces.
    """
    out: list[HierarchyNode] = []
    depth = latent.depth
    for m, module_name in enumerate(latent.module_names, start=1):
        group = latent.group_entity(m)
        out.append(HierarchyNode(group, "module", group, (), None, module_name, 0))
        emitted: set[tuple[int, ...]] = set()
        for path, block_name in zip(latent.block_paths, latent.block_names):
            for k in range(1, depth - 1):
                prefix = path[:k]
                if prefix not in emitted:
                    emitted.add(prefix)
                    sid = _semantic_id(group, latent.levels, prefix, None)
                    out.append(HierarchyNode(sid, latent.levels[k], group, prefix, None, None, k))
            block_sid = _semantic_id(group, latent.levels, path, None)
            out.append(HierarchyNode(block_sid, "block", group, path, None, block_name, depth - 1))
            for role in PORT_ROLES:
                sid = _semantic_id(group, latent.levels, path, role)
                out.append(HierarchyNode(sid, "port", group, path, role, None, depth))
            out.append(
                HierarchyNode(f"{block_sid}.{PARAM_STEP}", "param", group, path, None, param_name(block_name), depth)
            )
    return out


def instruction(latent: HierarchyLatent) -> str:
    """The natural-language instruction (shared by the tree and DOM surfaces of one latent).

    It names the target's module, its ordinal path (ordinal words or numbers per template), the
    role (ports) and the node kind; it never contains a surface id.
    """
    vocab = vocabulary()
    fields = {"group": latent.module_names[latent.target_module - 1], "role": latent.target_role or ""}
    for k, ordinal in enumerate(latent.target_path):
        kind = latent.levels[k + 1]
        fields[f"{kind}_ord"] = vocab["ordinals"][ordinal - 1]
        fields[f"{kind}_num"] = str(ordinal)
    template = vocab["templates"][latent.target_kind][str(latent.depth)][latent.template_index]
    return template.format(**fields)


def target(latent: HierarchyLatent) -> Target:
    """The target spec Y: semantic id, entity (the node), group, path, role, kind."""
    sid = latent.target_semantic_id()
    return Target(
        semantic_id=sid,
        entity=sid,
        group=latent.group_entity(latent.target_module),
        path=latent.target_path,
        role=latent.target_role,
        kind=latent.target_kind,
    )
