"""Limits on untrusted legacy input (docs/specification.md §8 "user-supplied legacy files are untrusted"; issue 11).

A legacy JSONL names SVGs inline (``svg``) or by path (``svg_file``). Both are untrusted:

- ``svg_file`` is confined to the JSONL's folder: no absolute path, no ``..`` component, and
  the resolved path (symlinks followed) must stay inside the folder's resolved path;
- only regular files are opened: :func:`os.stat` must say ``S_ISREG`` before the file is
  opened, it is opened with ``O_NONBLOCK`` (a FIFO swapped in between cannot block) and
  checked again with :func:`os.fstat`; at most :data:`MAX_SVG_BYTES` + 1 bytes are read;
- SVG text: at most :data:`MAX_SVG_BYTES` bytes of UTF-8, no ``<!ENTITY`` declaration and no
  internal DTD subset, at most :data:`MAX_ELEMENTS` XML elements, a canvas of at most
  :data:`MAX_SIDE_PX` px a side and :data:`MAX_PIXELS` px in all (as ``cairosvg`` sizes it:
  ``pt`` x 96/72, ``in`` x 96, ...).

Every check raises :class:`LimitError` with a message that says what is wrong and how to
fix it; :mod:`generator.legacy.converter` turns it into a ``LegacyRecordError`` naming the file, the
line and the field.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

MAX_SVG_BYTES = 2_000_000
"""Largest SVG (bytes); the shipped gallery's largest is under 200 KB."""
MAX_LINE_BYTES = 2 * MAX_SVG_BYTES + 1_000_000
"""Largest JSONL line (an inline SVG plus the other fields, JSON-escaped)."""
MAX_SIDE_PX = 8192
"""Largest canvas side (px) once rendered; the shipped gallery's largest is 2555 px."""
MAX_PIXELS = 16_000_000
"""Largest canvas area (width x height px); the shipped gallery's largest is 4.6 M px."""
MAX_ELEMENTS = 20_000
"""Most XML elements in one SVG; the shipped gallery's largest has under 2,500."""

_UNITS = {"": 1.0, "px": 1.0, "pt": 96.0 / 72.0, "pc": 16.0, "in": 96.0, "cm": 96.0 / 2.54, "mm": 96.0 / 25.4}
_LENGTH = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*([a-z]*)\s*$")
_ROOT = re.compile(r"<svg\b([^>]*)>", re.S)
_ATTR = re.compile(r"""([\w:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")


class LimitError(ValueError):
    """Untrusted input exceeds a limit or is not allowed; ``str(err)`` says what and how to fix it."""


def read_confined(base_dir: Path, relative: str) -> str:
    """Read ``base_dir / relative`` as UTF-8 text under the rules of the module docstring.

    Args:
        base_dir: the JSONL file's folder.
        relative: the ``svg_file`` value.

    Returns:
        The file's text.

    Raises:
        LimitError: absolute path, ``..``, a path leaving the folder (symlink), missing file,
            not a regular file, too large, or not UTF-8.
    """
    if os.path.isabs(relative) or relative.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", relative):
        raise LimitError(f"{relative!r} is an absolute path; give a path relative to the JSONL file's folder")
    if ".." in re.split(r"[\\/]+", relative):
        raise LimitError(f"{relative!r} leaves the JSONL file's folder ('..'); keep SVGs inside that folder")
    if "\x00" in relative:
        raise LimitError(f"{relative!r} contains a NUL character")
    root = os.path.realpath(base_dir)
    full = os.path.realpath(os.path.join(root, relative))
    if os.path.commonpath([root, full]) != root:
        raise LimitError(f"{relative!r} resolves to {full}, outside the JSONL file's folder {root} (a symlink?); "
                         "copy the SVG into that folder")
    try:
        info = os.stat(full)
    except OSError as exc:
        raise LimitError(f"cannot read {full} ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise LimitError(f"{full} is not a regular file (a FIFO, device or folder); give an SVG file")
    if info.st_size > MAX_SVG_BYTES:
        raise LimitError(f"{full} is {info.st_size} bytes, over the {MAX_SVG_BYTES}-byte limit; give a smaller SVG")
    try:
        fd = os.open(full, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise LimitError(f"cannot read {full} ({exc.strerror or exc})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LimitError(f"{full} is not a regular file; give an SVG file")
        chunks, size = [], 0
        while size <= MAX_SVG_BYTES:
            chunk = os.read(fd, min(1 << 20, MAX_SVG_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > MAX_SVG_BYTES:
        raise LimitError(f"{full} is over the {MAX_SVG_BYTES}-byte limit; give a smaller SVG")
    return decode_utf8(b"".join(chunks), str(full))


def decode_utf8(data: bytes, what: str) -> str:
    """Strict UTF-8 decoding. Raises :class:`LimitError` naming the first bad byte offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LimitError(f"{what} is not valid UTF-8 (byte {exc.start}: {data[exc.start:exc.start + 1]!r}); "
                         "save it as UTF-8") from None


def _length_px(value: str | None) -> float | None:
    if value is None:
        return None
    m = _LENGTH.match(value)
    if not m or m.group(2) not in _UNITS:
        return None
    return float(m.group(1)) * _UNITS[m.group(2)]


def canvas_px(svg: str) -> tuple[float, float] | None:
    """The rendered canvas ``(width, height)`` in px from the root ``width``/``height`` (or the
    viewBox when they are absent or relative); None when neither gives a size."""
    m = _ROOT.search(svg)
    if not m:
        return None
    attrs = {k: (a if a is not None else b) for k, a, b in _ATTR.findall(m.group(1))}
    w, h = _length_px(attrs.get("width")), _length_px(attrs.get("height"))
    box = (attrs.get("viewBox") or "").replace(",", " ").split()
    if (w is None or h is None) and len(box) == 4:
        try:
            vw, vh = float(box[2]), float(box[3])
        except ValueError:
            vw = vh = None
        if vw is not None:
            w = w if w is not None else vw
            h = h if h is not None else vh
    if w is None or h is None:
        return None
    return w, h


def check_svg_text(svg: str) -> None:
    """Apply the SVG text limits of the module docstring.

    Raises:
        LimitError: too large, DTD entity or internal subset, too many elements, canvas too large.
    """
    try:
        size = len(svg.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise LimitError(f"the SVG text holds a lone surrogate at character {exc.start}; give valid Unicode") from None
    if size > MAX_SVG_BYTES:
        raise LimitError(f"the SVG is {size} bytes, over the {MAX_SVG_BYTES}-byte limit; give a smaller SVG")
    if re.search(r"<!ENTITY", svg, re.I):
        raise LimitError("the SVG declares a DTD entity (<!ENTITY ...>); entities are refused, remove the DOCTYPE")
    doctype = re.search(r"<!DOCTYPE[^>\[]*\[", svg, re.I)
    if doctype:
        raise LimitError("the SVG has an internal DTD subset (<!DOCTYPE svg [...]>); remove it")
    elements = len(re.findall(r"<[A-Za-z_]", svg))
    if elements > MAX_ELEMENTS:
        raise LimitError(f"the SVG has {elements} elements, over the {MAX_ELEMENTS}-element limit; give a smaller graph")
    size_px = canvas_px(svg)
    if size_px is None:
        raise LimitError("the SVG root gives no canvas size (width/height or viewBox); write the dot SVG as it is")
    w, h = size_px
    if not (w > 0 and h > 0):
        raise LimitError(f"the SVG canvas is {w:g} x {h:g} px; width and height must be positive")
    if max(w, h) > MAX_SIDE_PX:
        raise LimitError(f"the SVG canvas is {w:.0f} x {h:.0f} px, over the {MAX_SIDE_PX} px side limit; "
                         "render the graph smaller (dot -Gsize=...)")
    if w * h > MAX_PIXELS:
        raise LimitError(f"the SVG canvas is {w:.0f} x {h:.0f} = {w * h:.0f} px, over the {MAX_PIXELS} px limit; "
                         "render the graph smaller (dot -Gsize=...)")
