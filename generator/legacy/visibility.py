"""Legibility and visibility of legacy SVG elements in the rendered PNG (docs/specification.md §7, §8; issue 9).

Two per-record checks of the legacy bridge read the SVG text (for sizes and paint colours)
and the rendered PNG (for ink), never a model output:

- legibility: every label an instruction relies on renders at :data:`MIN_LABEL_PX` px or
  more. The rendered text height of a ``<text>`` element is its ``font-size`` (user units)
  times the render scale, the PNG pixels per user unit of the ``graph0`` group
  (:func:`render_scale`: PNG width / viewBox width, times the ``graph0`` ``scale(..)``);
  an element's label height is the smallest over its ``<text>`` elements (0 when it has none).
- visibility: an element has visible ink when (a) one of its paint colours (shape
  ``stroke``/``fill``, text ``fill``, black when absent) differs from the background colour
  (the fill of the ``graph0`` background polygon, white when absent) by at least
  :data:`MIN_CONTRAST` in some RGB channel, and (b) at least :data:`MIN_INK_PIXELS` PNG
  pixels inside the element's painted box differ from the background by that much.
  A white edge on white (paint check) and a ``#f7f7f7`` cluster outline on white (paint
  check) both fail; so does an element whose box holds no ink.
"""

from __future__ import annotations

import functools
import io
import re
import xml.etree.ElementTree as ET
from typing import Optional

MIN_LABEL_PX = 8.0
"""Smallest rendered label height (px) an instruction may rely on (issue 9)."""
MIN_CONTRAST = 48
"""Smallest per-channel difference (0-255) from the background that counts as ink."""
MIN_INK_PIXELS = 4
"""Fewest contrasting PNG pixels inside an element's box for it to count as visible."""
DEFAULT_FONT_SIZE = 14.0  # dot's default, used when a <text> carries no font-size

_SVG = "{http://www.w3.org/2000/svg}"
_SCALE = re.compile(r"scale\(\s*([-+0-9.eE]+)(?:[\s,]+([-+0-9.eE]+))?\s*\)")
_SHAPES = ("ellipse", "polygon", "path", "polyline", "rect", "circle", "line")


def _rgb(value: Optional[str]) -> Optional[tuple[int, int, int]]:
    """An SVG paint as RGB; None for ``none``/``transparent``/unparseable paints."""
    from PIL import ImageColor

    if value is None:
        return None
    value = value.strip()
    if not value or value.lower() in ("none", "transparent") or value.startswith("url("):
        return None
    try:
        rgb = ImageColor.getrgb(value)
    except ValueError:
        return None
    if len(rgb) == 4 and rgb[3] == 0:
        return None
    return tuple(int(v) for v in rgb[:3])


def _graph_group(root: ET.Element) -> Optional[ET.Element]:
    for child in root:
        if child.tag == _SVG + "g" and child.get("class") == "graph":
            return child
    return None


@functools.lru_cache(maxsize=128)
def _parsed(svg: str) -> ET.Element:
    return ET.fromstring(svg.encode("utf-8"))


def render_scale(svg: str, png_size: tuple[int, int]) -> float:
    """PNG pixels per ``graph0`` user unit: (PNG width / viewBox width) x graph0 ``scale(sx)``.

    Args:
        svg: a dot SVG document.
        png_size: ``(width, height)`` of its rendered PNG.

    Returns:
        The factor (> 0). Without a viewBox the root ``width`` (in pt, as dot writes it,
        converted at 96/72) stands in for it.
    """
    root = _parsed(svg)
    view = (root.get("viewBox") or "").replace(",", " ").split()
    if len(view) == 4 and float(view[2]) > 0:
        per_unit = png_size[0] / float(view[2])
    else:
        per_unit = 96.0 / 72.0
    graph = _graph_group(root)
    m = _SCALE.search(graph.get("transform") or "") if graph is not None else None
    return per_unit * (float(m.group(1)) if m else 1.0)


def _element(svg: str, element_id: str) -> Optional[ET.Element]:
    for g in _parsed(svg).iter(_SVG + "g"):
        if g.get("id") == element_id:
            return g
    return None


def label_px(svg: str, element_id: str, png_size: tuple[int, int]) -> float:
    """Rendered height (px) of an element's label: the smallest ``font-size`` of its
    ``<text>`` elements times :func:`render_scale`; 0.0 when it has no text or is absent."""
    g = _element(svg, element_id)
    if g is None:
        return 0.0
    sizes = []
    for t in g.iter(_SVG + "text"):
        if not "".join(t.itertext()).strip():
            continue
        try:
            sizes.append(float(t.get("font-size", DEFAULT_FONT_SIZE)))
        except ValueError:
            sizes.append(DEFAULT_FONT_SIZE)
    return min(sizes) * render_scale(svg, png_size) if sizes else 0.0


def background_rgb(svg: str) -> tuple[int, int, int]:
    """Fill of the ``graph0`` background polygon (dot's first child polygon); white if absent."""
    graph = _graph_group(_parsed(svg))
    if graph is not None:
        for child in graph:
            if child.tag == _SVG + "polygon":
                return _rgb(child.get("fill")) or (255, 255, 255)
            if child.tag == _SVG + "g":
                break
    return (255, 255, 255)


def paint_colours(svg: str, element_id: str) -> list[tuple[int, int, int]]:
    """Every paint colour an element draws with (shape stroke/fill, text fill; SVG defaults:
    a shape's fill and a text's fill are black when not given, a shape's stroke is none)."""
    g = _element(svg, element_id)
    out = []
    if g is None:
        return out
    for e in g.iter():
        tag = e.tag.replace(_SVG, "")
        if tag in _SHAPES:
            for value in (e.get("stroke"), e.get("fill", "black")):
                rgb = _rgb(value)
                if rgb is not None:
                    out.append(rgb)
        elif tag == "text" and "".join(e.itertext()).strip():
            rgb = _rgb(e.get("fill", "black"))
            if rgb is not None:
                out.append(rgb)
    return out


def _contrast(a: tuple[int, int, int], b: tuple[int, int, int]) -> int:
    return max(abs(x - y) for x, y in zip(a, b))


@functools.lru_cache(maxsize=8)
def _pixels(png: bytes):
    """The PNG as an ``(H, W, 3)`` uint8 RGB array (cached for the last few images)."""
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        if im.mode in ("RGB", "RGBA"):  # cairo's modes; dropping alpha is what convert("RGB") does, minus a copy
            return np.asarray(im)[..., :3]
        return np.asarray(im.convert("RGB"))


def ink_pixels(png: bytes, box: Optional[list], background: tuple[int, int, int]) -> int:
    """PNG pixels inside ``box`` (``[x, y, w, h]``) differing from ``background`` by at least
    :data:`MIN_CONTRAST` in some channel (0 for a None or empty box)."""
    import numpy as np

    if not box or box[2] <= 0 or box[3] <= 0:
        return 0
    x, y, w, h = (int(v) for v in box)
    crop = _pixels(png)[max(y, 0):y + h, max(x, 0):x + w].astype(np.int16)
    diff = np.abs(crop - np.asarray(background, dtype=np.int16)).max(axis=2)
    return int((diff >= MIN_CONTRAST).sum())


def has_visible_ink(svg: str, element_id: str, box: Optional[list], png: bytes) -> bool:
    """The visibility rule of the module docstring for one element."""
    bg = background_rgb(svg)
    if not any(_contrast(c, bg) >= MIN_CONTRAST for c in paint_colours(svg, element_id)):
        return False
    return ink_pixels(png, box, bg) >= MIN_INK_PIXELS


def _names_in(instruction: str, forms: set[str]) -> bool:
    """True when a quoted form, or an unquoted form of 3+ characters as a whole word, occurs."""
    for form in forms:
        if not form:
            continue
        if f'"{form}"' in instruction:
            return True
        if len(form) >= 3 and re.search(r"(?<!\w)" + re.escape(form) + r"(?!\w)", instruction):
            return True
    return False


def relied_nodes(task_type: str, spec: dict) -> list[str]:
    """Titles of the nodes an instruction names (and so relies on being read): object and
    group: the node; edge: both endpoints; endpoint: the endpoint that is *not* asked."""
    if task_type in ("object", "group"):
        return [spec["node"]]
    a, b = spec["edge"]
    if task_type == "edge":
        return [a, b]
    return [b] if spec["endpoint"] == "source" else [a]


def check_record(svg: str, task_type: str, spec: dict, instruction: str, graph, boxes: dict, png: bytes,
                 gold_id: str, candidate_ids: list[str], ineligible: type) -> None:
    """The legacy bridge's task-need, legibility and visibility rules for one record (docs/specification.md §8).

    Args:
        svg: the SVG text; ``graph``: its :class:`generator.legacy.gallery.SvgGraph`; ``boxes``: painted
            boxes by element id; ``png``: the rendered PNG bytes.
        task_type, spec: the task type and structured target (node titles).
        instruction, gold_id, candidate_ids: as in the record.
        ineligible: the exception class to raise (``generator.legacy.converter.Ineligible``).

    Raises:
        ineligible: ``"instruction names the asked endpoint"`` (endpoint tasks),
            ``"fewer than 3 cluster candidates"`` (group tasks), ``"label renders below 8 px"``
            (a relied-on node label), ``"gold has no visible ink"``, ``"traced edge has no
            visible ink"`` (the edge of an endpoint task).
    """
    by_title = graph.node_by_title()
    if task_type == "endpoint":
        a, b = spec["edge"]
        asked = by_title[a if spec["endpoint"] == "source" else b]
        node = graph.nodes[asked]
        forms = {node.title, node.text}
        if _names_in(instruction, forms):
            raise ineligible("instruction names the asked endpoint")
    if task_type == "group" and sum(cid in graph.clusters for cid in candidate_ids) < 3:
        raise ineligible("fewer than 3 cluster candidates")
    height, width = _pixels(png).shape[:2]
    size = (width, height)
    for title in relied_nodes(task_type, spec):
        if label_px(svg, by_title[title], size) < MIN_LABEL_PX:
            raise ineligible("label renders below 8 px")
    if not has_visible_ink(svg, gold_id, boxes.get(gold_id), png):
        raise ineligible("gold has no visible ink")
    if task_type == "endpoint":
        a, b = spec["edge"]
        for e in graph.edges.values():
            if e.source == a and e.target == b and not has_visible_ink(svg, e.id, boxes.get(e.id), png):
                raise ineligible("traced edge has no visible ink")
