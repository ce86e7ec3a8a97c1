"""Painted pixel boxes of dot SVG elements (:func:`element_boxes`), measured by rasterizing.

Used by :mod:`generator.legacy.gallery` (which re-exports :func:`element_boxes`); see its module
docstring for what dot writes. Boxes are measured, not estimated: the extent of the pixels
with non-zero alpha when the element is rendered alone in the document's frame.
"""

from __future__ import annotations

import io
import math
import re
import xml.etree.ElementTree as ET
from typing import Optional

from generator.legacy.svg_graph import _NUMBER, _SHAPES, ELEMENT_CLASSES, SvgStructureError, _graph_group, _parse_root, _points, _tag


def _alpha_box(svg_text: str) -> tuple[Optional[list[int]], tuple[int, int]]:
    from PIL import Image

    from generator.render import rasterize

    png, size = rasterize(svg_text)
    with Image.open(io.BytesIO(png)) as im:
        box = im.convert("RGBA").getchannel("A").getbbox()
    if box is None:
        return None, size
    left, top, right, bottom = box
    return [left, top, right - left, bottom - top], size


CROP_PADS = (8, 64, 512)
"""Margins (px) tried around an element's estimated extent before measuring it on the full canvas."""
_TRANSFORM = re.compile(r"(scale|rotate|translate)\(\s*([^)]*)\)")


def _graph_matrix(transform: str):
    """The ``graph0`` transform (``scale(..) rotate(..) translate(..)`` as dot writes it) as a
    function user point -> root user point; None for anything else."""
    ops = _TRANSFORM.findall(transform or "")
    if "".join(f"{k}({v})" for k, v in ops).replace(" ", "") != re.sub(r"\s+", "", transform or ""):
        return None
    steps = []
    for kind, args in ops:
        vals = [float(v) for v in _NUMBER.findall(args)]
        if kind == "scale":
            sx = vals[0] if vals else 1.0
            steps.append(("s", sx, vals[1] if len(vals) > 1 else sx))
        elif kind == "translate":
            steps.append(("t", vals[0] if vals else 0.0, vals[1] if len(vals) > 1 else 0.0))
        else:
            if len(vals) != 1:
                return None
            a = math.radians(vals[0])
            steps.append(("r", math.cos(a), math.sin(a)))

    def apply(x: float, y: float) -> tuple[float, float]:
        for kind, p, q in reversed(steps):
            if kind == "s":
                x, y = x * p, y * q
            elif kind == "t":
                x, y = x + p, y + q
            else:
                x, y = x * p - y * q, x * q + y * p
        return x, y

    return apply


def _element_extent(g: ET.Element) -> Optional[tuple[float, float, float, float]]:
    """Generous user-unit extent of an element: its shapes' coordinates and an over-estimate
    of each text's box (width = characters x font size, height = 1.5 x font size)."""
    xs: list[float] = []
    ys: list[float] = []
    for elem in g.iter():
        tag = elem.tag.split("}")[-1]
        if tag in _SHAPES:
            for x, y in _points(elem):
                xs.append(x)
                ys.append(y)
        elif tag == "text":
            try:
                x, y, size = float(elem.get("x", 0)), float(elem.get("y", 0)), float(elem.get("font-size", 14))
            except ValueError:
                return None
            width = max(1, len("".join(elem.itertext()))) * size
            xs += [x - width, x + width]
            ys += [y - 1.5 * size, y + 0.75 * size]
    if not xs:
        return None
    return min(xs), min(ys), max(xs), max(ys)


def element_boxes(svg: str) -> tuple[dict[str, Optional[list[int]]], tuple[int, int]]:
    """Painted pixel box of every node, edge and cluster element, in the PNG frame.

    Each element is rasterized alone (:func:`generator.render.rasterize`, cairosvg) in a
    document made of the same ``<svg>`` root attributes, the root's other children (defs)
    and the same ``graph0`` group attributes (transform), holding only that element; the
    graph's background polygon is left out, so every pixel with non-zero alpha is the
    element's own paint (fills, strokes, arrowheads, label glyphs). The whole canvas is
    rendered once (for its size); each element is rendered on a crop of the canvas around a
    generous estimate of its extent (same pixels per unit, the crop origin on whole pixels),
    so the cost grows with the elements' sizes, not with the canvas size per element. An
    element whose paint reaches the crop's border is measured again on the full canvas.

    Args:
        svg: a dot SVG document.

    Returns:
        ``({element id: [x, y, w, h] or None}, (width, height))``: integer pixels, origin
        top-left, the box holding exactly the painted pixels (``x + w`` and ``y + h`` are
        exclusive); None for an element that paints nothing (``style=invis``). The size is
        the PNG size of the whole document. The gallery's boxes are stored in
        :data:`BOXES_FILE`; use :func:`boxes_for`.
    """
    from generator.legacy.limits import canvas_px

    root = _parse_root(svg)
    graph = _graph_group(root)
    wanted = [g for g in graph.iter(_tag("g")) if g.get("class") in ELEMENT_CLASSES and g.get("id")]
    others = [child for child in root if child is not graph]
    _, size = _alpha_box(svg)
    view = [float(v) for v in _NUMBER.findall(root.get("viewBox") or "")]
    to_root = _graph_matrix(graph.get("transform") or "")
    frame = None
    exact = canvas_px(svg)  # the unrounded canvas size cairosvg scales by
    if len(view) == 4 and view[2] > 0 and view[3] > 0 and to_root is not None and exact is not None:
        per = min(exact[0] / view[2], exact[1] / view[3])
        frame = (view, per, (exact[0] - view[2] * per) / 2, (exact[1] - view[3] * per) / 2)

    def alone(g: ET.Element, attrs: dict) -> tuple[Optional[list[int]], tuple[int, int]]:
        doc = ET.Element(root.tag, attrs)
        for child in others:
            doc.append(child)
        holder = ET.SubElement(doc, graph.tag, dict(graph.attrib))
        holder.append(g)
        return _alpha_box(ET.tostring(doc, encoding="unicode"))

    boxes: dict[str, Optional[list[int]]] = {}
    for g in wanted:
        extent = _element_extent(g) if frame is not None else None
        box = None
        if extent is not None:
            (vx, vy, _vw, _vh), per, ox, oy = frame
            corners = [to_root(x, y) for x in (extent[0], extent[2]) for y in (extent[1], extent[3])]
            px = [(cx - vx) * per + ox for cx, _ in corners]
            py = [(cy - vy) * per + oy for _, cy in corners]
            for pad in CROP_PADS:
                x0, y0 = max(0, math.floor(min(px)) - pad), max(0, math.floor(min(py)) - pad)
                x1, y1 = min(size[0], math.ceil(max(px)) + pad), min(size[1], math.ceil(max(py)) + pad)
                if x1 <= x0 or y1 <= y0 or (x1 - x0) * (y1 - y0) * 2 > size[0] * size[1]:
                    break  # a crop this large saves nothing: measure on the full canvas
                w, h = x1 - x0, y1 - y0
                attrs = dict(root.attrib)
                attrs.update(width=f"{w}px", height=f"{h}px",
                             viewBox=f"{vx + (x0 - ox) / per!r} {vy + (y0 - oy) / per!r} {w / per!r} {h / per!r}")
                attrs["preserveAspectRatio"] = "none"
                crop, own = alone(g, attrs)
                if crop is None or own != (w, h):
                    break
                inside = ((crop[0] > 0 or x0 == 0) and (crop[1] > 0 or y0 == 0)
                          and (crop[0] + crop[2] < w or x1 == size[0]) and (crop[1] + crop[3] < h or y1 == size[1]))
                if inside:
                    box = [crop[0] + x0, crop[1] + y0, crop[2], crop[3]]
                    break
        if box is None:
            box, own = alone(g, dict(root.attrib))
            if own != size:
                raise SvgStructureError(f"element {g.get('id')!r} rendered at {own}, the document at {size}")
        boxes[g.get("id")] = box
    return boxes, size
