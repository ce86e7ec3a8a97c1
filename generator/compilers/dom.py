"""DOM surface compiler: a hierarchy latent as nested HTML (docs/specification.md §3, §11).

Every node is an element with an opaque id, nested like the latent::

    <div class="design">
      <section id="d_3fa2" class="module">
        <h3>Module B</h3>
        <div id="d_51c0" class="stage">
          <div id="d_77de" class="block">
            <h4>fetch</h4>
            <span id="d_a3b0" class="port" data-role="input">in</span>
            <span id="d_0e19" class="port" data-role="output">out</span>
            <span id="d_9c41" class="param">addr</span>
          </div>
        </div>
      </section>
    </div>

Headings carry no id and are not candidates. A candidate's text is the element's own visible
text: the module heading, the block heading, the port label, the parameter name; ``""`` for
units and stages.
"""

from __future__ import annotations

import html
import random

from generator.families import hierarchy
from generator.ids import opaque_ids
from generator.schema import Candidate, SurfaceCase

ID_PREFIX = "d"
INDENT = "  "
# Element tag and heading tag (None: no own text) per node kind.
ELEMENTS = {
    "module": ("section", "h3"),
    "unit": ("div", None),
    "stage": ("div", None),
    "block": ("div", "h4"),
}
PORT_LABELS = {"input": "in", "output": "out"}


def dom_text(node: hierarchy.HierarchyNode) -> str:
    """The element's own visible text: heading (module, block), port label, param name, or ``""``."""
    if node.kind == "port":
        return PORT_LABELS[node.role]
    if node.kind == "param":
        return node.name
    return node.name if ELEMENTS[node.kind][1] is not None else ""


def compile_dom(latent: hierarchy.HierarchyLatent, rng: random.Random) -> SurfaceCase:
    """Compile ``latent`` to an ``html_dom`` case (output key ``dom_id``).

    Draws one opaque ``d_xxxx`` id per node from ``rng`` (document order), writes the nested
    HTML (each id exactly once, as an ``id`` attribute), then shuffles the inventory with ``rng``.
    """
    doc = hierarchy.nodes(latent)
    ids = opaque_ids(rng, ID_PREFIX, len(doc))
    lines = ['<div class="design">']
    open_stack: list[tuple[int, str]] = []  # (level, closing tag)
    candidates: list[Candidate] = []

    def pad(level: int) -> str:
        return INDENT * (level + 1)

    for node, cid in zip(doc, ids):
        while open_stack and open_stack[-1][0] >= node.level:
            level, tag = open_stack.pop()
            lines.append(f"{pad(level)}</{tag}>")
        text = dom_text(node)
        if node.kind == "port":
            lines.append(
                f'{pad(node.level)}<span id="{cid}" class="port" data-role="{node.role}">{html.escape(text)}</span>'
            )
        elif node.kind == "param":
            lines.append(f'{pad(node.level)}<span id="{cid}" class="param">{html.escape(text)}</span>')
        else:
            tag, heading = ELEMENTS[node.kind]
            lines.append(f'{pad(node.level)}<{tag} id="{cid}" class="{node.kind}">')
            if heading is not None:
                lines.append(f"{pad(node.level + 1)}<{heading}>{html.escape(text)}</{heading}>")
            open_stack.append((node.level, tag))
        candidates.append(Candidate(cid, "dom_element", text, node.meaning()))
    while open_stack:
        level, tag = open_stack.pop()
        lines.append(f"{pad(level)}</{tag}>")
    lines.append("</div>")
    rng.shuffle(candidates)
    return SurfaceCase(
        format="dom",
        instruction=hierarchy.instruction(latent),
        source_type="html_dom",
        source="\n".join(lines),
        candidates=candidates,
        target=hierarchy.target(latent),
    )
