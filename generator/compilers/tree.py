"""Tree surface compiler: a hierarchy latent as an indented text outline (docs/specification.md §3, §11).

One node per line, two spaces of indent per nesting level, the node's opaque id in brackets
followed by its visible label::

    [n_3fa2] module "Module B"
      [n_51c0] stage
        [n_77de] block "fetch"
          [n_a3b0] port input
          [n_0e19] port output
          [n_9c41] param "addr"

Every node is a ``tree_node`` candidate whose text is its label (the line without the id).
"""

from __future__ import annotations

import random

from generator.families import hierarchy
from generator.ids import opaque_ids
from generator.schema import Candidate, SurfaceCase

ID_PREFIX = "n"
INDENT = "  "
# Visible label per node kind; {name} / {role} come from the node.
LABELS = {
    "module": 'module "{name}"',
    "unit": "unit",
    "stage": "stage",
    "block": 'block "{name}"',
    "port": "port {role}",
    "param": 'param "{name}"',
}


def tree_label(node: hierarchy.HierarchyNode) -> str:
    """The visible label of ``node`` on its outline line (e.g. ``'port output'``)."""
    return LABELS[node.kind].format(name=node.name, role=node.role)


def compile_tree(latent: hierarchy.HierarchyLatent, rng: random.Random) -> SurfaceCase:
    """Compile ``latent`` to a ``tree_outline`` case (output key ``target_id``).

    Draws one opaque ``n_xxxx`` id per node from ``rng`` (document order), writes the outline
    (each id exactly once), then shuffles the candidate inventory with ``rng``.
    """
    doc = hierarchy.nodes(latent)
    ids = opaque_ids(rng, ID_PREFIX, len(doc))
    lines: list[str] = []
    candidates: list[Candidate] = []
    for node, cid in zip(doc, ids):
        label = tree_label(node)
        lines.append(f"{INDENT * node.level}[{cid}] {label}")
        candidates.append(Candidate(cid, "tree_node", label, node.meaning()))
    rng.shuffle(candidates)
    return SurfaceCase(
        format="tree",
        instruction=hierarchy.instruction(latent),
        source_type="tree_outline",
        source="\n".join(lines),
        candidates=candidates,
        target=hierarchy.target(latent),
    )
