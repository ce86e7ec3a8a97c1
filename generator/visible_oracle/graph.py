"""Visible-oracle solver for the graph family (see :mod:`generator.visible_oracle`).

Reads only what the prompt shows: the ``graph_edges`` observation (node lines
``node <id> "<name>"`` and edge lines ``<id> -> <id> [<label>]``), the instruction and the
candidate rows. The instruction is read back through the public templates of
``generator/data/graph.json`` with node names and edge labels restricted to those the
observation shows; the solver answers with the ordered endpoints of the one edge that
runs from the named source to the named target with the named label, and never raises.
"""

from __future__ import annotations

import re
from typing import Optional

from generator.families.graph import load_data
from generator.visible_oracle.template_match import ANY_TEXT, output_keys, read_instruction

_NODE_LINE = re.compile(r'^node (?P<id>\S+) "(?P<name>[^"]*)"$')
_EDGE_LINE = re.compile(r"^(?P<source>\S+) -> (?P<target>\S+) \[(?P<label>[^\]]*)\]$")


def parse_graph_edges(source: str) -> Optional[tuple[dict[str, str], list[tuple[str, str, str]]]]:
    """``({node_id: name}, [(source_id, target_id, label), ...])`` from a ``graph_edges``
    source, or None when a line is neither a node nor an edge line, or an edge names an
    undeclared node."""
    names: dict[str, str] = {}
    edges: list[tuple[str, str, str]] = []
    for line in source.splitlines():
        line = line.strip()
        if not line:
            continue
        node, edge = _NODE_LINE.match(line), _EDGE_LINE.match(line)
        if node is not None:
            names[node.group("id")] = node.group("name")
        elif edge is not None:
            edges.append((edge.group("source"), edge.group("target"), edge.group("label")))
        else:
            return None
    if any(s not in names or t not in names for s, t, _ in edges):
        return None
    return names, edges


def solve(view: dict, image) -> dict | None:
    """Answer a graph case from the model-visible view only.

    Args:
        view: :func:`generator.visible_oracle.visible_view` output.
        image: ignored (text format).

    Returns:
        ``{"source_id": id, "target_id": id}`` when every template reading of the
        instruction picks the same single edge and both ids are candidates; else None.
    """
    source, instruction = view.get("source"), view.get("instruction")
    keys = output_keys(view)
    if not isinstance(source, str) or not isinstance(instruction, str) or set(keys) != {"source_id", "target_id"}:
        return None
    parsed = parse_graph_edges(source)
    if parsed is None:
        return None
    names, edges = parsed
    fields = {"source": ANY_TEXT, "target": ANY_TEXT, "label": ANY_TEXT}
    templates = [(pool, t) for pool, ts in load_data()["instructions"].items() for t in ts]
    shown_names, shown_labels = set(names.values()), {label for _, _, label in edges}
    answers = set()
    for _, values in read_instruction(instruction, templates, fields):
        if not ({values["source"], values["target"]} <= shown_names and values["label"] in shown_labels):
            continue
        hits = [(s, t) for s, t, label in edges
                if names[s] == values["source"] and names[t] == values["target"] and label == values["label"]]
        answers.add(hits[0] if len(hits) == 1 else None)
    candidate_ids = {c.get("candidate_id") for c in view.get("candidates") or []}
    if len(answers) != 1 or None in answers:
        return None
    (src, dst), = answers
    if src not in candidate_ids or dst not in candidate_ids:
        return None
    return {"source_id": src, "target_id": dst}
