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

Rasterizing (:func:`rasterize`, :func:`rasterize_many`) goes through a PNG disk cache keyed by
the SHA-256 of the SVG (plus :data:`RENDERER_VERSION`, the cairosvg and cairo versions) under
``$EXBIND_CACHE_DIR/png/`` (default ``~/.cache/exbind/png/``); every entry is checked on
read, written atomically, and the bytes returned are the same with or without it
(``EXBIND_RENDER_CACHE=0`` turns it off). An unwritable cache folder only costs the re-rendering.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import signal
import stat
import struct
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path
from typing import Iterator, Optional

import cairocffi
import cairosvg

from generator.families.relational import GRID_COLS, GRID_ROWS
from generator.files import make_temp_file

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


# --------------------------------------------------------------------------- rasterizing, PNG disk cache

RENDERER_VERSION = "1"
"""Part of every cache key: bump it whenever :func:`rasterize_uncached` would give other bytes for
the same SVG (another cairosvg call or option, post-processing), so older entries are never read."""
CACHE_DIR_ENV = "EXBIND_CACHE_DIR"
"""Cache root; PNGs go to ``<root>/png/`` (default root ``$XDG_CACHE_HOME/exbind``, ``~/.cache/exbind``)."""
CACHE_SWITCH_ENV = "EXBIND_RENDER_CACHE"
"""``0`` (or ``false``/``no``/``off``) turns the PNG cache off; unset, ``1``, ``true``... leave it on."""
MAX_CACHED_PNG_BYTES = 96 * 1024 * 1024
"""Largest PNG stored (and read back): above the worst case of a 16-megapixel RGBA legacy picture."""
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_DIGEST_BYTES = 32
_SWITCH_OFF = ("0", "false", "no", "off")
_SWITCH_ON = ("", "1", "true", "yes", "on")


class RasterizeError(ValueError):
    """A document of :func:`rasterize_many` cannot be rendered; ``str(err)`` is
    ``"svgs[<i>]: cannot be rendered (<ExceptionType>: <message>)"`` (first failing index)."""


def cache_enabled() -> bool:
    """Whether :func:`rasterize` reads and writes the disk cache (``$EXBIND_RENDER_CACHE``).

    Raises:
        ValueError: the variable holds something other than 0/1/true/false/yes/no/on/off.
    """
    raw = os.environ.get(CACHE_SWITCH_ENV, "")
    value = raw.strip().lower()
    if value in _SWITCH_OFF:
        return False
    if value in _SWITCH_ON:
        return True
    raise ValueError(f"{CACHE_SWITCH_ENV}={raw!r}: set it to 0 to turn the PNG cache off, "
                     "or 1 (or unset it) to keep it on")


def cache_dir() -> Path:
    """The PNG cache folder: ``$EXBIND_CACHE_DIR/png``, else ``$XDG_CACHE_HOME/exbind/png``
    (``~/.cache/exbind/png``). Nothing is created here."""
    root = os.environ.get(CACHE_DIR_ENV)
    if root:
        return Path(root) / "png"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "exbind" / "png"


@functools.lru_cache(maxsize=1)
def _key_prefix() -> bytes:
    return (f"exbind-png\0renderer {RENDERER_VERSION}\0cairosvg {cairosvg.__version__}\0"
            f"cairo {cairocffi.cairo_version_string()}\0").encode("utf-8")


def cache_key(svg: str) -> str:
    """Hex SHA-256 of the SVG's UTF-8 bytes, prefixed by :data:`RENDERER_VERSION`, the cairosvg
    version and the cairo library version (a change of any of them misses every old entry)."""
    return hashlib.sha256(_key_prefix() + svg.encode("utf-8")).hexdigest()


def cache_path(key: str) -> Path:
    """Entry file of a key: ``<cache_dir>/<key[:2]>/<key[2:4]>/<key>.bin`` (two-level fan-out)."""
    return cache_dir() / key[:2] / key[2:4] / f"{key}.bin"


def png_size(png: bytes) -> tuple[int, int]:
    """``(width, height)`` of a PNG, read from its IHDR chunk.

    Raises:
        ValueError: the bytes do not start with a PNG signature and an IHDR chunk.
    """
    if len(png) < 24 or png[:8] != _PNG_SIGNATURE or png[12:16] != b"IHDR":
        raise ValueError("not a PNG: no PNG signature followed by an IHDR chunk")
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)


def read_entry(path: Path) -> Optional[bytes]:
    """The PNG of a cache entry (file = SHA-256 digest of the PNG, 32 bytes, then the PNG), or
    None when the entry is absent, unreadable, not a regular file, over the size limit, or its
    digest or PNG header does not check out (a caller then renders and overwrites it)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            limit = _DIGEST_BYTES + MAX_CACHED_PNG_BYTES
            if not stat.S_ISREG(info.st_mode) or not _DIGEST_BYTES + 24 <= info.st_size <= limit:
                return None
            data = fh.read(limit + 1)
    except OSError:
        return None
    digest, png = data[:_DIGEST_BYTES], data[_DIGEST_BYTES:]
    if len(png) > MAX_CACHED_PNG_BYTES or hashlib.sha256(png).digest() != digest:
        return None
    try:
        png_size(png)
    except ValueError:
        return None
    return png


def write_entry(path: Path, png: bytes) -> bool:
    """Store a PNG at ``path`` atomically (a temporary file in the same folder, then
    ``os.replace``; the umask mode, :func:`generator.files.make_temp_file`), so concurrent
    writers and readers only ever see whole entries.

    Returns:
        True when stored; False when the PNG is over :data:`MAX_CACHED_PNG_BYTES` or the
        folder cannot be written (read-only, full disk, ...): the cache is an optimisation and
        never fails a build.
    """
    if len(png) > MAX_CACHED_PNG_BYTES:
        return False
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = make_temp_file(path.parent, prefix=".tmp-", suffix=".bin")
        with os.fdopen(fd, "wb") as fh:
            fh.write(hashlib.sha256(png).digest())
            fh.write(png)
        os.replace(tmp, path)
        tmp = None
        return True
    except OSError:
        return False
    finally:  # also on Ctrl-C mid-write: no temporary file is left behind
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def rasterize_uncached(svg: str) -> tuple[bytes, tuple[int, int]]:
    """:func:`rasterize` without the disk cache: cairosvg alone, external resources disabled
    (the cache's source of truth, and the rendering floor of ``scripts/benchmark_build.py``)."""
    png = cairosvg.svg2png(bytestring=svg.encode("utf-8"), unsafe=False)
    return png, png_size(png)


def _render_and_store(svg: str, use_cache: bool) -> tuple[bytes, tuple[int, int]]:
    png, size = rasterize_uncached(svg)
    if use_cache:
        write_entry(cache_path(cache_key(svg)), png)
    return png, size


def _cached(svg: str) -> Optional[tuple[bytes, tuple[int, int]]]:
    png = read_entry(cache_path(cache_key(svg)))
    return None if png is None else (png, png_size(png))


def rasterize(svg: str) -> tuple[bytes, tuple[int, int]]:
    """Rasterize an SVG document to PNG with cairosvg, external resources disabled, through
    the disk cache (:func:`cache_dir`, keyed by :func:`cache_key`; off with ``EXBIND_RENDER_CACHE=0``).

    Args:
        svg: a complete SVG document (ExBind's own pictures are font-free, so their bytes do
            not depend on installed fonts; legacy Graphviz pictures draw text).

    Returns:
        ``(png_bytes, (width, height))``; the size is read from the PNG header. Deterministic:
        the same SVG gives the same bytes, with or without the cache.

    Raises:
        ValueError: a bad ``EXBIND_RENDER_CACHE`` value; whatever cairosvg raises on a document
            it cannot render (nothing is cached then).
    """
    use_cache = cache_enabled()
    hit = _cached(svg) if use_cache else None
    return hit if hit is not None else _render_and_store(svg, use_cache)


def _ignore_sigint() -> None:
    """Pool initializer: Ctrl-C reaches the parent only, which stops the pool (no worker tracebacks)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _job(svg: str, use_cache: bool):
    """One pool task: ``("ok", png, size)`` or ``("error", "<Type>: <message>")``."""
    try:
        png, size = _render_and_store(svg, use_cache)
    except Exception as exc:  # noqa: BLE001 - cairosvg/PIL raise many types on hostile SVGs
        return ("error", f"{type(exc).__name__}: {str(exc)[:200]}")
    return ("ok", png, size)


def iter_rasterized(svgs: list[str], processes: Optional[int] = None, skip_errors: bool = False,
                    pool=None) -> Iterator[Optional[tuple[bytes, tuple[int, int]]]]:
    """:func:`rasterize_many`, lazily: yields each document's result, in the order of ``svgs``,
    as soon as it is ready, so a caller can use the first pictures while workers render the
    next ones. Close the iterator (or exhaust it) to stop the pool; the arguments, the cache
    switch and the cache entries are checked before it is returned.

    ``pool``: a running ``multiprocessing`` pool to render in (the release build shares its
    generation pool, so legacy pictures render between generated latents); it is left open."""
    if processes is not None and (isinstance(processes, bool) or not isinstance(processes, int) or processes < 1):
        raise ValueError(f"processes must be a positive integer or None, got {processes!r}")
    use_cache = cache_enabled()
    results: dict[str, tuple] = {}
    missing = []
    for svg in dict.fromkeys(svgs):
        hit = _cached(svg) if use_cache else None
        if hit is not None:
            results[svg] = ("ok", *hit)
        else:
            missing.append(svg)
    workers = min(processes or min(os.cpu_count() or 1, 4), len(missing))
    if pool is not None and missing:  # submitted now: the shared pool starts on them at once
        return _stream(svgs, results, missing, 0, use_cache, skip_errors,
                       pool.imap(functools.partial(_job, use_cache=use_cache), missing))
    return _stream(svgs, results, missing, workers, use_cache, skip_errors)


def _stream(svgs, results: dict, missing: list[str], workers: int, use_cache: bool, skip_errors: bool,
            rendered=None):
    pool = None
    if rendered is None and workers > 1:
        pool = ProcessPoolExecutor(workers, mp_context=get_context("fork"), initializer=_ignore_sigint)
        rendered = pool.map(_job, missing, [use_cache] * len(missing))
    elif rendered is None:
        rendered = (_job(svg, use_cache) for svg in missing)
    try:
        for i, svg in enumerate(svgs):
            if svg not in results:
                try:
                    results[svg] = next(rendered)  # missing is in first-appearance order
                except BrokenProcessPool:
                    raise RuntimeError(f"a rendering worker died while rendering {len(missing)} SVG documents "
                                       "(killed by the OS, e.g. out of memory, or crashed in cairo); rerun with "
                                       "processes=1 to see which") from None
            result = results[svg]
            if result[0] == "ok":
                yield result[1], result[2]
            elif skip_errors:
                yield None
            else:
                raise RasterizeError(f"svgs[{i}]: cannot be rendered ({result[1]})")
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def rasterize_many(svgs: list[str], processes: Optional[int] = None,
                   skip_errors: bool = False) -> list[Optional[tuple[bytes, tuple[int, int]]]]:
    """:func:`rasterize` every document, the distinct ones not in the cache in a fork pool.

    The cache is read in this process first, so a warm run starts no pool; each distinct
    document is rendered once, in order of first appearance, and its entry written by the
    worker that rendered it. Workers ignore Ctrl-C; the parent stops the pool.

    Args:
        svgs: SVG documents (repeats allowed).
        processes: worker processes (default ``min(cpu_count, 4)``); 1 renders in this process.
            Never more than the documents left to render.
        skip_errors: give None for a document that cannot be rendered instead of raising
            (callers render it alone to get cairosvg's own exception).

    Returns:
        ``[(png_bytes, (width, height)) or None]`` in the order of ``svgs``, byte-identical to
        ``[rasterize(s) for s in svgs]``.

    Raises:
        ValueError: ``processes`` is not a positive int or None; a bad ``EXBIND_RENDER_CACHE``.
        RasterizeError: a document cannot be rendered (unless ``skip_errors``).
        RuntimeError: a worker died (killed by the OS, e.g. out of memory, or crashed in cairo).
    """
    stream = iter_rasterized(svgs, processes, skip_errors)
    try:
        return list(stream)
    finally:
        stream.close()
