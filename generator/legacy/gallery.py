"""The Graphviz example gallery as legacy SVG material: the shipped files, their stored
painted boxes, and the enlarged copies.

The shipped SVGs (``generator/legacy/data/gallery/<name>.svg``) are ``dot -Tsvg`` renderings of the
example graphs of Debian's ``graphviz-doc`` package (EPL-1.0; see ``LICENSE`` and
``PROVENANCE.md`` in that folder). ``scripts/render_graphviz_gallery.sh`` regenerates them
and then calls ``python -m generator.legacy.gallery boxes`` to recompute :data:`BOXES_FILE`; the
default build only reads the shipped files (no system package needed). The SVG structure is
read by :mod:`generator.legacy.svg_graph` (re-exported here); pixel boxes are measured by
:func:`generator.legacy.measure.element_boxes` (each element rasterized alone in the same
frame as the whole document; its box is the extent of its non-transparent pixels).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import re
from pathlib import Path
from typing import Optional

from generator.legacy.measure import element_boxes
from generator.legacy.svg_graph import (SvgCluster, SvgEdge, SvgGraph, SvgNode, SvgStructureError,  # noqa: F401
                                        normalize_text, parse_svg, parse_svg_cached)

DATA_DIR = Path(__file__).resolve().parent / "data"
GALLERY_DIR = DATA_DIR / "gallery"
BOXES_FILE = GALLERY_DIR / "boxes.json"
LARGE_DIR = GALLERY_DIR / "large"
"""Enlarged renderings (issue 9 legibility): for every shipped SVG whose smallest label
renders under 8 px, a copy with only the root ``width``/``height`` multiplied (viewBox and
content unchanged), written by ``python -m generator.legacy.gallery large`` with its own ``boxes.json``."""
MIN_LABEL_PX = 8.0


# --------------------------------------------------------------------------- pixel boxes


def sha256_text(text: str) -> str:
    """Hex SHA-256 of the UTF-8 text (the key that ties stored boxes to one SVG text)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@functools.lru_cache(maxsize=1)
def _stored_boxes() -> dict[str, dict]:
    out = {}
    for path in (BOXES_FILE, LARGE_DIR / "boxes.json"):
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            out.update({entry["sha256"]: entry for entry in data.values()})
    return out


@functools.lru_cache(maxsize=256)
def boxes_for(svg: str) -> tuple[dict[str, Optional[list[int]]], tuple[int, int]]:
    """Boxes of :func:`element_boxes`, read from :data:`BOXES_FILE` when the SVG text is a
    shipped gallery SVG (matched by SHA-256), else measured (and cached in this process)."""
    entry = _stored_boxes().get(sha256_text(svg))
    if entry is not None:
        return {k: (list(v) if v is not None else None) for k, v in entry["boxes"].items()}, tuple(entry["image_size"])
    return element_boxes(svg)


# --------------------------------------------------------------------------- shipped gallery


def gallery_names() -> list[str]:
    """File names (``<name>.svg``) of the shipped gallery SVGs, sorted."""
    return sorted(p.name for p in GALLERY_DIR.glob("*.svg"))


@functools.lru_cache(maxsize=None)
def gallery_svg(name: str) -> str:
    """The text of one shipped gallery SVG (``name`` as in :func:`gallery_names`)."""
    return (GALLERY_DIR / name).read_text(encoding="utf-8")


def enlargement(svg: str) -> float:
    """Factor (a multiple of 0.05, >= 1) by which the root size must grow so that every
    label of the SVG renders at :data:`MIN_LABEL_PX` px or more (1.0 when it already does)."""
    from generator.legacy.visibility import label_px
    from generator.legacy.limits import canvas_px

    w, h = canvas_px(svg)
    size = (round(w), round(h))
    graph = parse_svg_cached(svg)
    heights = [label_px(svg, gid, size) for gid in graph.order]
    heights = [v for v in heights if v > 0]
    if not heights or min(heights) >= MIN_LABEL_PX:
        return 1.0
    return math.ceil(MIN_LABEL_PX / min(heights) * 20 + 1e-9) / 20


def enlarge(svg: str, factor: float) -> str:
    """The SVG with its root ``width`` and ``height`` multiplied by ``factor`` (units kept)."""
    def scale(m: re.Match) -> str:
        return f'{m.group(1)}="{float(m.group(2)) * factor:.2f}{m.group(3)}"'

    head, rest = svg.split("<svg", 1)
    tag, tail = rest.split(">", 1)
    tag = re.sub(r'\b(width|height)="([0-9.]+)([a-z]*)"', scale, tag)
    return f"{head}<svg{tag}>{tail}"


def write_large() -> dict:
    """Write :data:`LARGE_DIR`: the enlarged copy of every shipped SVG that needs one, and
    their measured boxes. Returns ``{name: factor}``."""
    LARGE_DIR.mkdir(exist_ok=True)
    factors, out = {}, {}
    for name in gallery_names():
        svg = gallery_svg(name)
        factor = enlargement(svg)
        if factor == 1.0:
            continue
        big = enlarge(svg, factor)
        (LARGE_DIR / name).write_text(big, encoding="utf-8")
        boxes, size = element_boxes(big)
        out[name] = {"sha256": sha256_text(big), "image_size": list(size), "boxes": boxes, "factor": factor}
        factors[name] = factor
    (LARGE_DIR / "boxes.json").write_text(json.dumps(out, sort_keys=True, separators=(",", ":")) + "\n",
                                          encoding="utf-8")
    _stored_boxes.cache_clear()
    return factors


def task_svg_name(name: str) -> str:
    """Path (relative to the data folder's ``gallery``) of the rendering tasks use: the
    enlarged copy when one exists, else the shipped SVG."""
    return f"large/{name}" if (LARGE_DIR / name).exists() else name


def write_boxes(path: Path = BOXES_FILE) -> dict:
    """Measure every shipped SVG's element boxes and write them to ``path`` (sorted JSON).

    Returns the written mapping (see :data:`BOXES_FILE`).
    """
    out = {}
    for name in gallery_names():
        svg = gallery_svg(name)
        boxes, size = element_boxes(svg)
        out[name] = {"sha256": sha256_text(svg), "image_size": list(size), "boxes": boxes}
    path.write_text(json.dumps(out, sort_keys=True, separators=(",", ":")) + "\n", encoding="utf-8")
    _stored_boxes.cache_clear()
    return out


def dot_json_membership(dot_json: dict) -> dict[str, set[str]]:
    """``{node name: {cluster names containing it}}`` from ``dot -Tjson`` output (the
    ``objects`` list: subgraphs first, ``_subgraph_cnt`` of them, each with ``nodes``
    indices; clusters are the subgraphs named ``cluster*``). Only nodes in a cluster appear."""
    objects = dot_json.get("objects") or []
    out: dict[str, set[str]] = {}
    for sub in objects[: dot_json.get("_subgraph_cnt", 0)]:
        if sub.get("name", "").startswith("cluster"):
            for i in sub.get("nodes") or []:
                out.setdefault(objects[i]["name"], set()).add(sub["name"])
    return out


def svg_membership(graph: SvgGraph) -> dict[str, set[str]]:
    """The geometric membership of :func:`parse_svg` in the form of :func:`dot_json_membership`."""
    return {graph.nodes[nid].title: {graph.clusters[c].title for c in chain}
            for nid, chain in graph.node_chain.items() if chain}


def verify_clusters(json_dir: Path) -> list[str]:
    """Compare every shipped SVG's geometric cluster membership with ``<json_dir>/<name>.json``
    (``dot -Tjson`` of the same graph). Returns the names that differ (``[]`` when all agree)."""
    bad = []
    for name in gallery_names():
        path = Path(json_dir) / (name[:-4] + ".json")
        truth = dot_json_membership(json.loads(path.read_text(encoding="utf-8")))
        if svg_membership(parse_svg(gallery_svg(name))) != truth:
            bad.append(name)
    return bad


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m generator.legacy.gallery boxes``: rewrite :data:`BOXES_FILE` from the shipped SVGs;
    ``python -m generator.legacy.gallery verify-clusters DIR``: check the derived cluster membership
    against ``dot -Tjson`` files in DIR (exit status 1 when any graph differs)."""
    parser = argparse.ArgumentParser(prog="python -m generator.legacy.gallery", description=main.__doc__)
    parser.add_argument("command", choices=["boxes", "large", "verify-clusters"])
    parser.add_argument("json_dir", nargs="?", type=Path)
    args = parser.parse_args(argv)
    if args.command == "verify-clusters":
        if args.json_dir is None:
            parser.error("verify-clusters needs the folder of dot -Tjson files")
        bad = verify_clusters(args.json_dir)
        print(f"cluster membership differs from dot -Tjson in: {', '.join(bad)}" if bad
              else f"cluster membership agrees with dot -Tjson for all {len(gallery_names())} SVGs")
        return 1 if bad else 0
    if args.command == "large":
        factors = write_large()
        print(f"wrote {LARGE_DIR}: " + ", ".join(f"{k} x{v:g}" for k, v in sorted(factors.items())))
        return 0
    out = write_boxes()
    n = sum(len(v["boxes"]) for v in out.values())
    print(f"wrote {BOXES_FILE} ({len(out)} SVGs, {n} elements)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
