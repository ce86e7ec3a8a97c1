"""Rendering helpers for the rendered surfaces (svg, canvas): scene layout, shape geometry,
pixel bounding boxes and rasterization (docs/specification.md §3 "rendered PNG and pixel bounding boxes").

Layout: the latent grid (5 x 4 cells) is drawn with ``CELL`` px cells inside a ``MARGIN`` px
border, so the picture is ``440 x 360`` px; object centres sit at cell centres, so "same
column" in the latent grid is "same x" in the picture. Geometry is in PNG pixels (the SVG
viewBox equals its width/height, so user units are pixels).

Shape outlines are small tuples, shared by the SVG compiler and the canvas scene builder:
- ``("circle", cx, cy, r)``;
- ``("rect", x, y, w, h)``;
- ``("polygon", ((x0, y0), (x1, y1), ...))`` (closed).
Every stroked outline uses round joins, so its painted extent is the outline's extent grown
by exactly half the stroke width on every side (no mitre spikes).
"""

from __future__ import annotations

import io
import math

import cairosvg
from PIL import Image

from generator.families.relational import GRID_COLS, GRID_ROWS

CELL = 80  # px per latent grid cell
MARGIN = 20  # px around the grid
IMAGE_SIZE: tuple[int, int] = (2 * MARGIN + GRID_COLS * CELL, 2 * MARGIN + GRID_ROWS * CELL)  # (440, 360)
BACKGROUND = "#ffffff"
INK = "#333333"  # outline colour of bodies, rings and marks
BODY_STROKE = 2.0
RING_STROKE = 2.0
MARK_STROKE = 1.5
BODY_SIZE = 24.0  # nominal radius of a body; per-shape factors below
SHAPE_FACTOR = {"circle": 1.0, "square": 0.85, "triangle": 1.15, "diamond": 1.1}
RING_SCALE = 1.3  # outline ring = body outline scaled about the centre
MARK_RADIUS = 6.0  # inner mark = small white disc at the centre


def num(x: float):
    """Normalize a coordinate: an ``int`` when integral, else a float rounded to 0.1 px.

    Coordinates are stored this way in outlines, SVG attributes and canvas programs, so a
    program parsed back from text compares equal to the scene it came from.
    """
    v = round(float(x), 1)
    return int(v) if v == int(v) else v


def cell_center(position: tuple[int, int]) -> tuple[int, int]:
    """Pixel centre ``(x, y)`` of latent grid cell ``(col, row)``."""
    col, row = position
    return MARGIN + col * CELL + CELL // 2, MARGIN + row * CELL + CELL // 2


def shape_outline(shape: str, cx: float, cy: float, scale: float = 1.0) -> tuple:
    """Outline of a body of ``shape`` centred at ``(cx, cy)``, scaled by ``scale``.

    Returns ``("circle", cx, cy, r)``, ``("rect", x, y, w, h)`` (squares) or
    ``("polygon", points)`` (triangle: point up; diamond: corners on the axes).

    Raises:
        ValueError: unknown shape.
    """
    if shape not in SHAPE_FACTOR:
        raise ValueError(f"unknown shape {shape!r}")
    r = BODY_SIZE * SHAPE_FACTOR[shape] * scale
    if shape == "circle":
        return ("circle", num(cx), num(cy), num(r))
    if shape == "square":
        return ("rect", num(cx - r), num(cy - r), num(2 * r), num(2 * r))
    if shape == "triangle":
        angles = (-90.0, 30.0, 150.0)
    else:  # diamond
        angles = (-90.0, 0.0, 90.0, 180.0)
    pts = tuple(
        (num(cx + r * math.cos(math.radians(a))), num(cy + r * math.sin(math.radians(a)))) for a in angles
    )
    return ("polygon", pts)


def mark_outline(cx: float, cy: float) -> tuple:
    """The inner mark of a grouped object: a small disc at the body centre."""
    return ("circle", num(cx), num(cy), num(MARK_RADIUS))


def outline_extent(outline: tuple) -> tuple[float, float, float, float]:
    """Exact geometric extent ``(x0, y0, x1, y1)`` of an outline (stroke not included)."""
    kind = outline[0]
    if kind == "circle":
        _, cx, cy, r = outline
        return cx - r, cy - r, cx + r, cy + r
    if kind == "rect":
        _, x, y, w, h = outline
        return x, y, x + w, y + h
    if kind == "polygon":
        xs = [p[0] for p in outline[1]]
        ys = [p[1] for p in outline[1]]
        return min(xs), min(ys), max(xs), max(ys)
    raise ValueError(f"unknown outline kind {kind!r}")


def painted_bbox(outline: tuple, stroke_width: float) -> list[float]:
    """Pixel bbox ``[x, y, w, h]`` of an outline painted with a round-joined stroke.

    The geometric extent is grown by ``stroke_width / 2`` and rounded outward to whole pixels
    plus 1 px for anti-aliasing, so every pixel the rasterizer touches lies inside and each
    edge is within 2 px of a painted pixel. Values are whole numbers (as floats).
    """
    x0, y0, x1, y1 = outline_extent(outline)
    half = stroke_width / 2.0
    left = math.floor(x0 - half) - 1
    top = math.floor(y0 - half) - 1
    right = math.ceil(x1 + half) + 1
    bottom = math.ceil(y1 + half) + 1
    return [float(left), float(top), float(right - left), float(bottom - top)]


def union_bbox(boxes: list[list[float]]) -> list[float]:
    """Smallest ``[x, y, w, h]`` containing every box of ``boxes`` (non-empty)."""
    left = min(b[0] for b in boxes)
    top = min(b[1] for b in boxes)
    right = max(b[0] + b[2] for b in boxes)
    bottom = max(b[1] + b[3] for b in boxes)
    return [left, top, right - left, bottom - top]


def rasterize(svg: str) -> tuple[bytes, tuple[int, int]]:
    """Rasterize an SVG document to PNG with cairosvg, external resources disabled.

    Args:
        svg: a complete SVG document (no text is needed: ExBind pictures are font-free, so
            the bytes do not depend on installed fonts).

    Returns:
        ``(png_bytes, (width, height))``; the size is read back from the PNG with PIL.
        Deterministic: the same SVG gives the same bytes.
    """
    png = cairosvg.svg2png(bytestring=svg.encode("utf-8"), unsafe=False)
    with Image.open(io.BytesIO(png)) as im:
        size = (int(im.width), int(im.height))
    return png, size
