"""Visible-oracle solver for the hierarchy family (see :mod:`generator.visible_oracle`).

Reads only what the prompt shows: the instruction, the observation source (the tree outline
of the ``tree`` format or the HTML DOM of the ``dom`` format) and the candidate rows. The
source is parsed into a node tree (kind, visible name, port role, children in document
order); the instruction is read back through the public templates of
``generator/data/hierarchy.json``; the named module, the ordinal path below it (k-th child
of the named kind at each level), the role and the node kind are then resolved in that tree
(paper §3-4: group, hierarchy, role, attribute). The solver answers only when every reading
of the instruction resolves to the same single candidate, and never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from html.parser import HTMLParser
from typing import Optional

from generator.families.hierarchy import vocabulary
from generator.visible_oracle.template_match import ANY_TEXT, alternatives, output_keys, read_instruction

# Tree outline line: indent, [id], label (generator/compilers/tree.py writes this form).
_TREE_LINE = re.compile(r'^(?P<indent> *)\[(?P<id>[^\]\s]+)\] (?P<label>.*)$')
_TREE_LABEL = re.compile(r'^(?P<kind>[a-z]+)(?: (?:"(?P<name>[^"]*)"|(?P<role>[a-z]+)))?$')
_INDENT = 2


@dataclass
class VisibleNode:
    """One node as the observation shows it.

    Attributes:
        node_id: the surface id (a candidate id when the node is a candidate).
        kind: the visible kind (``module``, ``unit``, ``stage``, ``block``, ``port``, ``param``).
        name: the visible name (modules, blocks, params) or None.
        role: the visible port role (``input``/``output``) or None.
        children: child nodes in document order.
    """

    node_id: str
    kind: str
    name: Optional[str] = None
    role: Optional[str] = None
    children: list["VisibleNode"] = field(default_factory=list)


def parse_tree_outline(source: str) -> Optional[list[VisibleNode]]:
    """The top-level nodes of a ``tree_outline`` source, or None when a line does not parse
    or the indentation skips a level."""
    roots: list[VisibleNode] = []
    stack: list[VisibleNode] = []
    for line in source.splitlines():
        if not line.strip():
            continue
        m = _TREE_LINE.match(line)
        if m is None or len(m.group("indent")) % _INDENT:
            return None
        label = _TREE_LABEL.match(m.group("label").strip())
        if label is None:
            return None
        level = len(m.group("indent")) // _INDENT
        if level > len(stack):
            return None
        del stack[level:]
        node = VisibleNode(m.group("id"), label.group("kind"), label.group("name"), label.group("role"))
        (stack[-1].children if stack else roots).append(node)
        stack.append(node)
    return roots


class _DomReader(HTMLParser):
    """Builds :class:`VisibleNode` s from elements that carry an ``id``; the text of an
    ``h3``/``h4`` heading names its enclosing element, an id'd span's text is its own name."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.roots: list[VisibleNode] = []
        self.open: list[tuple[str, Optional[VisibleNode]]] = []  # (tag, node or None)
        self.heading: Optional[VisibleNode] = None
        self.text: list[str] = []
        self.ok = True

    def _enclosing(self) -> Optional[VisibleNode]:
        return next((n for _, n in reversed(self.open) if n is not None), None)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        node = None
        if a.get("id"):
            node = VisibleNode(a["id"], (a.get("class") or "").strip(), None, a.get("data-role"))
            parent = self._enclosing()
            (parent.children if parent else self.roots).append(node)
        elif tag in ("h3", "h4"):
            self.heading = self._enclosing()
        self.open.append((tag, node))
        self.text = []

    def handle_endtag(self, tag):
        if not self.open or self.open[-1][0] != tag:
            self.ok = False
            return
        _, node = self.open.pop()
        text = "".join(self.text).strip()
        if tag in ("h3", "h4") and self.heading is not None:
            self.heading.name = text
            self.heading = None
        elif node is not None and node.kind in ("port", "param"):
            node.name = text
        self.text = []

    def handle_data(self, data):
        self.text.append(data)


def parse_dom(source: str) -> Optional[list[VisibleNode]]:
    """The top-level id'd elements of an ``html_dom`` source (nested as in the HTML), or
    None when the HTML is not well nested."""
    reader = _DomReader()
    reader.feed(source)
    reader.close()
    if not reader.ok or reader.open:
        return None
    return reader.roots


def _walk(nodes: list[VisibleNode]) -> list[VisibleNode]:
    """Every node under ``nodes`` in document (pre-)order."""
    out: list[VisibleNode] = []
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(node.children))
    return out


def _templates():
    vocab = vocabulary()
    for kind, by_depth in vocab["templates"].items():
        for depth, templates in by_depth.items():
            for template in templates:
                yield (kind, depth), template


@lru_cache(maxsize=1)
def _fields() -> dict:
    """Placeholder regexes: any text for the module name (checked against the source after
    matching), the public roles and ordinals, and numbers."""
    vocab = vocabulary()
    fields = {"group": ANY_TEXT, "role": alternatives(vocab["roles"])}
    for level in {lvl for d in vocab["depths"].values() for lvl in d["levels"][1:]}:
        fields[f"{level}_ord"] = alternatives(vocab["ordinals"])
        fields[f"{level}_num"] = r"[1-9][0-9]*"
    return fields


def _resolve(all_modules: list[VisibleNode], kind: str, depth: str, values: dict) -> Optional[str]:
    """The id of the one node the parsed instruction names, or None."""
    vocab = vocabulary()
    modules = [n for n in all_modules if n.name == values["group"]]
    if len(modules) != 1:
        return None
    node = modules[0]
    for level in vocab["depths"][depth]["levels"][1:]:
        if f"{level}_ord" in values:
            ordinal = vocab["ordinals"].index(values[f"{level}_ord"]) + 1
        elif f"{level}_num" in values:
            ordinal = int(values[f"{level}_num"])
        else:
            return None
        same_kind = [c for c in node.children if c.kind == level]
        if not 1 <= ordinal <= len(same_kind):
            return None
        node = same_kind[ordinal - 1]
    if kind == "block":
        return node.node_id if node.kind == "block" else None
    ports = [c for c in node.children if c.kind == "port" and c.role == values.get("role")]
    return ports[0].node_id if len(ports) == 1 else None


def solve(view: dict, image) -> dict | None:
    """Answer a tree or dom hierarchy case from the model-visible view only.

    Args:
        view: :func:`generator.visible_oracle.visible_view` output (``format``,
            ``instruction``, ``source``, ``candidates``, ``output_schema``).
        image: ignored (text formats).

    Returns:
        ``{"target_id": id}`` (tree) or ``{"dom_id": id}`` (dom) when the instruction,
        read through the public templates, resolves to exactly one candidate; else None.
    """
    source, instruction = view.get("source"), view.get("instruction")
    keys = output_keys(view)
    if not isinstance(source, str) or not isinstance(instruction, str) or len(keys) != 1:
        return None
    roots = parse_dom(source) if view.get("format") == "dom" else parse_tree_outline(source)
    if not roots:
        return None
    modules = [n for n in _walk(roots) if n.kind == "module"]
    names = {n.name for n in modules if n.name}
    readings = [(tag, values) for tag, values in read_instruction(instruction, _templates(), _fields())
                if values["group"] in names]
    answers = {_resolve(modules, kind, depth, values) for (kind, depth), values in readings}
    candidate_ids = {c.get("candidate_id") for c in view.get("candidates") or []}
    if len(answers) != 1 or None in answers or not answers <= candidate_ids:
        return None
    return {keys[0]: answers.pop()}
