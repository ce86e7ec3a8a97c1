"""Structure of a ``dot -Tsvg`` document: nodes, edges, clusters and derived membership.

What ``dot`` writes and this module reads (graphviz 2.4x SVG output):

- ``<g id="nodeN" class="node"><title>NAME</title> shapes... <text>label</text></g>``;
- ``<g id="edgeN" class="edge"><title>A->B</title>...`` (``A--B`` in undirected graphs;
  record ports appear as ``A:port->B:port``);
- ``<g id="clustN" class="cluster"><title>cluster_x</title><polygon .../><text>label</text></g>``.

All three are siblings inside ``<g id="graph0" class="graph" transform=...>``, so their
coordinates share one user space. Cluster membership is not written by ``dot``; it is
derived geometrically (:func:`parse_svg`): a node belongs to every cluster whose shape's
extent contains the centre of the node's first shape (dot lays clusters out as boxes that
enclose exactly their member nodes), and the innermost cluster is the smallest of them.
The pixel boxes are measured by :mod:`generator.legacy.measure`; the shipped files and
their stored boxes are :mod:`generator.legacy.gallery`.
"""

from __future__ import annotations

import functools
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Optional

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
ET.register_namespace("", SVG_NS)
ET.register_namespace("xlink", XLINK_NS)

ELEMENT_CLASSES = ("node", "edge", "cluster")

_SHAPES = ("ellipse", "polygon", "path", "polyline", "rect", "circle", "line")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_SPACE = re.compile(r"\s+")


def _tag(name: str) -> str:
    return f"{{{SVG_NS}}}{name}"


def normalize_text(text: str) -> str:
    """Collapse every run of whitespace (no-break spaces included) to one space and strip."""
    return _SPACE.sub(" ", text.replace("\xa0", " ")).strip()


@dataclass(frozen=True)
class SvgNode:
    """A ``class="node"`` element: ``id`` (e.g. ``node3``), ``title`` (the dot node name),
    ``text`` (its visible label: every ``<text>`` joined by spaces, normalized) and ``center``
    (``(x, y)`` centre of its first shape's extent, in graph0 user units; None if it has none)."""

    id: str
    title: str
    text: str
    center: Optional[tuple[float, float]]


@dataclass(frozen=True)
class SvgEdge:
    """A ``class="edge"`` element: ``source``/``target`` are node titles (ports stripped),
    both None when the title cannot be split into two known node names; ``directed`` is True
    for ``A->B`` titles and False for ``A--B``; ``text`` is the visible edge label."""

    id: str
    title: str
    text: str
    source: Optional[str]
    target: Optional[str]
    directed: bool


@dataclass(frozen=True)
class SvgCluster:
    """A ``class="cluster"`` element: ``title`` (``cluster_x``), ``text`` (visible label) and
    ``extent`` (``(x0, y0, x1, y1)`` of its first shape, graph0 user units)."""

    id: str
    title: str
    text: str
    extent: Optional[tuple[float, float, float, float]]


@dataclass
class SvgGraph:
    """The structure of one dot SVG.

    Attributes:
        order: ids of every node, edge and cluster element in document order.
        nodes, edges, clusters: ``{element id: SvgNode | SvgEdge | SvgCluster}``.
        node_chain: ``{node id: [cluster ids containing it, innermost first]}``.
        cluster_chain: ``{cluster id: [cluster ids strictly containing it, innermost first]}``.
    """

    order: list[str]
    nodes: dict[str, SvgNode]
    edges: dict[str, SvgEdge]
    clusters: dict[str, SvgCluster]
    node_chain: dict[str, list[str]] = field(default_factory=dict)
    cluster_chain: dict[str, list[str]] = field(default_factory=dict)

    def node_by_title(self) -> dict[str, str]:
        """``{node title: node id}`` (dot node names are unique within a graph)."""
        return {n.title: n.id for n in self.nodes.values()}

    def kind(self, element_id: str) -> str:
        """``"node"``, ``"edge"`` or ``"cluster"``; KeyError for an unknown id."""
        if element_id in self.nodes:
            return "node"
        if element_id in self.edges:
            return "edge"
        if element_id in self.clusters:
            return "cluster"
        raise KeyError(element_id)


class SvgStructureError(ValueError):
    """The text is not an SVG document with a dot ``graph0`` group; the message says why."""


def _points(elem: ET.Element) -> list[tuple[float, float]]:
    """Coordinates of a shape element (user units; path: every number pair of ``d``)."""
    tag = elem.tag.split("}")[-1]
    num = lambda name: float(elem.get(name, "0"))  # noqa: E731
    if tag == "ellipse":
        cx, cy, rx, ry = num("cx"), num("cy"), num("rx"), num("ry")
        return [(cx - rx, cy - ry), (cx + rx, cy + ry)]
    if tag == "circle":
        cx, cy, r = num("cx"), num("cy"), num("r")
        return [(cx - r, cy - r), (cx + r, cy + r)]
    if tag == "rect":
        x, y = num("x"), num("y")
        return [(x, y), (x + num("width"), y + num("height"))]
    if tag == "line":
        return [(num("x1"), num("y1")), (num("x2"), num("y2"))]
    values = [float(v) for v in _NUMBER.findall(elem.get("points") or elem.get("d") or "")]
    return list(zip(values[0::2], values[1::2]))


def _first_extent(group: ET.Element) -> Optional[tuple[float, float, float, float]]:
    for elem in group.iter():
        if elem.tag.split("}")[-1] in _SHAPES:
            pts = _points(elem)
            if pts:
                xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                return min(xs), min(ys), max(xs), max(ys)
    return None


def _visible_text(group: ET.Element) -> str:
    return normalize_text(" ".join("".join(t.itertext()) for t in group.iter(_tag("text"))))


def _split_edge(title: str, names: set[str]) -> tuple[Optional[str], Optional[str], bool]:
    """Split an edge title into (source, target, directed) node names, ports stripped."""

    def node_of(part: str) -> Optional[str]:
        # "name", "name:port" or "name:port:compass": strip one ':' suffix at a time.
        while True:
            if part in names:
                return part
            if ":" not in part:
                return None
            part = part.rsplit(":", 1)[0]

    for op, directed in (("->", True), ("--", False)):
        found = []
        start = 0
        while (i := title.find(op, start)) >= 0:
            a, b = node_of(title[:i]), node_of(title[i + 2:])
            if a is not None and b is not None:
                found.append((a, b))
            start = i + 1
        if len(set(found)) == 1:
            return found[0][0], found[0][1], directed
    return None, None, "->" in title


def _graph_group(root: ET.Element) -> ET.Element:
    for child in root:
        if child.tag == _tag("g") and child.get("class") == "graph":
            return child
    raise SvgStructureError("no <g class=\"graph\"> group under <svg>: not a dot SVG")


def _parse_root(svg: str) -> ET.Element:
    try:
        root = ET.fromstring(svg.encode("utf-8"))
    except ET.ParseError as exc:
        raise SvgStructureError(f"not well-formed XML ({exc})") from None
    if root.tag != _tag("svg"):
        raise SvgStructureError(f"root element is {root.tag!r}, expected an SVG <svg>")
    return root


def _inside(inner: tuple, outer: tuple, eps: float = 1e-6) -> bool:
    return (outer[0] - eps <= inner[0] and outer[1] - eps <= inner[1]
            and inner[2] <= outer[2] + eps and inner[3] <= outer[3] + eps)


def _area(ext: tuple) -> float:
    return (ext[2] - ext[0]) * (ext[3] - ext[1])


def parse_svg(svg: str) -> SvgGraph:
    """Read the node, edge and cluster elements of a dot SVG and derive cluster membership.

    Args:
        svg: the SVG document text (as ``dot -Tsvg`` writes it).

    Returns:
        An :class:`SvgGraph`. Elements are the ``<g>`` elements with an ``id`` and a
        ``class`` of ``node``, ``edge`` or ``cluster`` anywhere under ``graph0``.

    Raises:
        SvgStructureError: not XML, not ``<svg>``, no ``graph0`` group, an element without
            a ``<title>``, or a duplicate element id.
    """
    root = _parse_root(svg)
    graph = _graph_group(root)
    order: list[str] = []
    nodes: dict[str, SvgNode] = {}
    clusters: dict[str, SvgCluster] = {}
    raw_edges: list[tuple[str, str, str]] = []
    for g in graph.iter(_tag("g")):
        cls, gid = g.get("class"), g.get("id")
        if cls not in ELEMENT_CLASSES or not gid:
            continue
        title_el = g.find(_tag("title"))
        if title_el is None or title_el.text is None:
            raise SvgStructureError(f"element {gid!r} (class {cls}) has no <title>")
        if gid in order:
            raise SvgStructureError(f"duplicate element id {gid!r}")
        order.append(gid)
        title, text = title_el.text, _visible_text(g)
        if cls == "node":
            ext = _first_extent(g)
            if ext is None:
                first_text = g.find(_tag("text"))
                center = (float(first_text.get("x", 0)), float(first_text.get("y", 0))) if first_text is not None else None
            else:
                center = ((ext[0] + ext[2]) / 2, (ext[1] + ext[3]) / 2)
            nodes[gid] = SvgNode(gid, title, text, center)
        elif cls == "cluster":
            clusters[gid] = SvgCluster(gid, title, text, _first_extent(g))
        else:
            raw_edges.append((gid, title, text))
    names = {n.title for n in nodes.values()}
    edges = {}
    for gid, title, text in raw_edges:
        src, dst, directed = _split_edge(title, names)
        edges[gid] = SvgEdge(gid, title, text, src, dst, directed)
    out = SvgGraph(order, nodes, edges, clusters)
    boxed = [c for c in clusters.values() if c.extent is not None]
    for n in nodes.values():
        if n.center is None:
            out.node_chain[n.id] = []
            continue
        x, y = n.center
        inside = [c for c in boxed if c.extent[0] < x < c.extent[2] and c.extent[1] < y < c.extent[3]]
        out.node_chain[n.id] = [c.id for c in sorted(inside, key=lambda c: (_area(c.extent), order.index(c.id)))]
    for c in clusters.values():
        if c.extent is None:
            out.cluster_chain[c.id] = []
            continue
        outer = [o for o in boxed if o.id != c.id and _inside(c.extent, o.extent) and _area(o.extent) > _area(c.extent)]
        out.cluster_chain[c.id] = [o.id for o in sorted(outer, key=lambda o: (_area(o.extent), order.index(o.id)))]
    return out


@functools.lru_cache(maxsize=128)
def parse_svg_cached(svg: str) -> SvgGraph:
    """:func:`parse_svg`, cached per SVG text (treat the result as read-only)."""
    return parse_svg(svg)
