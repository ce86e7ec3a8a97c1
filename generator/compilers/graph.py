"""Graph-edge-list surface compiler K_graph (docs/specification.md §3, §6, §11; paper §3 eq. 2, A.3).

Observation (``graph_edges``): a node list, one line per node ``node g_3fa2 "parser"``,
then one line per edge ``g_3fa2 -> g_9b01 [calls]``; both blocks in a seeded shuffled
order. Candidates are the nodes (type ``graph_node``, endpoint role metadata
``["source", "target"]`` on each), in a separate seeded shuffle. The answer is the ordered
pair ``{"source_id", "target_id"}``.
"""

from __future__ import annotations

import random

from generator.families.graph import GraphLatent, load_data
from generator.ids import opaque_ids
from generator.schema import Candidate, Meaning, SurfaceCase, Target

ID_PREFIX = "g"


def render_instruction(latent: GraphLatent, template: str) -> str:
    """Fill one instruction template with the source name, edge label and target name."""
    return template.format(
        source=latent.names[latent.source], label=latent.label, target=latent.names[latent.target]
    )


def render_source(latent: GraphLatent, ids: list[str], rng: random.Random) -> str:
    """The ``graph_edges`` serialization; ``ids[k]`` is node ``k``'s surface id."""
    node_lines = [f'node {ids[k]} "{name}"' for k, name in enumerate(latent.names)]
    edge_lines = [f"{ids[s]} -> {ids[t]} [{label}]" for s, t, label in latent.edges]
    rng.shuffle(node_lines)
    rng.shuffle(edge_lines)
    return "\n".join(node_lines + edge_lines)


def instruction_templates(latent: GraphLatent) -> list[str]:
    """The template pool for ``latent``: ``target_first`` templates (target node mentioned
    first) when ``latent.target_first``, else ``source_first`` ones; all ask for the source
    then the target (``generator/data/graph.json``)."""
    pools = load_data()["instructions"]
    return pools["target_first" if latent.target_first else "source_first"]


def compile_graph(latent: GraphLatent, rng: random.Random) -> SurfaceCase:
    """Compile a graph latent into its edge-list surface case.

    Args:
        latent: a :class:`~generator.families.graph.GraphLatent`.
        rng: the case's RNG; draws the node ids (``g_xxxx``), the instruction template
            (from :func:`instruction_templates`, one ``randrange`` over a pool of 6), the
            node/edge line orders and the candidate order, in that order.

    Returns:
        A :class:`SurfaceCase` with one candidate per node (text = node name). Meaning:
        semantic id = entity = ``<latent>_node<k>``, ``attributes=(("name", name),)``.
        Target: ``source``/``target`` and their semantic ids, ``edge_label``, ``edges``
        (every latent edge as sorted ``(source_entity, target_entity, label)``) and
        ``attributes=(("source_name", A), ("target_name", B))``.
    """
    n = len(latent.names)
    ids = opaque_ids(rng, ID_PREFIX, n)
    templates = instruction_templates(latent)
    instruction = render_instruction(latent, templates[rng.randrange(len(templates))])
    source = render_source(latent, ids, rng)
    candidates = [
        Candidate(
            candidate_id=ids[k],
            candidate_type="graph_node",
            text=name,
            meaning=Meaning(
                semantic_id=latent.node_entity(k),
                entity=latent.node_entity(k),
                canonical=True,
                attributes=(("name", name),),
            ),
            roles=["source", "target"],
        )
        for k, name in enumerate(latent.names)
    ]
    rng.shuffle(candidates)
    src, dst = latent.node_entity(latent.source), latent.node_entity(latent.target)
    target = Target(
        source=src,
        target=dst,
        source_semantic_id=src,
        target_semantic_id=dst,
        edge_label=latent.label,
        edges=tuple(sorted((latent.node_entity(s), latent.node_entity(t), label) for s, t, label in latent.edges)),
        attributes=(("source_name", latent.names[latent.source]), ("target_name", latent.names[latent.target])),
    )
    return SurfaceCase(
        format="graph",
        instruction=instruction,
        source_type="graph_edges",
        source=source,
        candidates=candidates,
        target=target,
    )
