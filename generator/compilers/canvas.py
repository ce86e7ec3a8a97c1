"""Canvas-2D surface compiler for the relational family (docs/specification.md §3, §11 "Canvas"; paper §4.2).

One *scene command list* is the single source of both the observation and the picture:

- :func:`scene_to_program` turns it into a canvas-2D JavaScript drawing program (the
  observation, ``source_type="canvas2d_js"``), one statement per line;
- :func:`scene_to_svg` turns it into the SVG that is rasterized to the PNG;
- :func:`parse_canvas_program` reads a program back into the scene, so
  ``parse_canvas_program(scene_to_program(scene)) == scene``.

Scene format: a list of entries ``{"id": str | None, "commands": [[op, *args], ...]}``. The
first entry (``id`` None) is the preamble: ``["width", W]``, ``["height", H]``,
``["lineJoin", "round"]``, then the white background (``["fillStyle", "#ffffff"]``,
``["fillRect", 0, 0, W, H]``). Every other entry is one scene object, its ``id`` the
candidate id (``o_xxxx``), drawn with ``fillStyle``, ``strokeStyle``, ``lineWidth``,
``beginPath``, a path (``["arc", cx, cy, r]`` = a full circle, ``["rect", x, y, w, h]``, or
``moveTo``/``lineTo``/``closePath``), ``fill``, ``stroke``. Numbers are ints or floats
rounded to 0.1 (:func:`generator.render.num`). In the program each object block starts with
the comment ``// object <id>``: the only place its id occurs.
"""

from __future__ import annotations

import json
import random
import re

from generator.families.relational import COLORS, RelationalLatent, instruction_text, object_meaning, target_spec
from generator.ids import opaque_ids
from generator.render import BACKGROUND, BODY_STROKE, IMAGE_SIZE, INK, cell_center, num, painted_bbox, shape_outline
from generator.compilers.svg import svg_document, svg_shape
from generator.schema import Candidate, SurfaceCase

CANDIDATE_TYPE = "canvas_object"
_CANVAS_PROPS = ("width", "height")  # canvas.<prop> = value
_CTX_PROPS = ("fillStyle", "strokeStyle", "lineWidth", "lineJoin")  # ctx.<prop> = value
_CTX_METHODS = ("beginPath", "closePath", "moveTo", "lineTo", "arc", "rect", "fill", "stroke", "fillRect")
_FULL_TURN = "0, 2 * Math.PI"


def outline_commands(outline: tuple) -> list[list]:
    """Canvas path commands (without ``beginPath``) that trace a render outline."""
    kind = outline[0]
    if kind == "circle":
        return [["arc", outline[1], outline[2], outline[3]]]
    if kind == "rect":
        return [["rect", *outline[1:]]]
    if kind == "polygon":
        (x0, y0), *rest = outline[1]
        return [["moveTo", x0, y0], *[["lineTo", x, y] for x, y in rest], ["closePath"]]
    raise ValueError(f"unknown outline kind {kind!r}")


def build_scene(latent: RelationalLatent, ids_in_order: list[str], order: list[int]) -> list[dict]:
    """The scene command list: preamble, then objects ``order`` (latent indices) with ``ids_in_order``."""
    w, h = IMAGE_SIZE
    scene: list[dict] = [
        {
            "id": None,
            "commands": [
                ["width", w],
                ["height", h],
                ["lineJoin", "round"],
                ["fillStyle", BACKGROUND],
                ["fillRect", 0, 0, w, h],
            ],
        }
    ]
    for oid, i in zip(ids_in_order, order):
        obj = latent.objects[i]
        body = shape_outline(obj.shape, *cell_center(obj.position))
        commands = [
            ["fillStyle", COLORS[obj.color]],
            ["strokeStyle", INK],
            ["lineWidth", num(BODY_STROKE)],
            ["beginPath"],
            *outline_commands(body),
            ["fill"],
            ["stroke"],
        ]
        scene.append({"id": oid, "commands": commands})
    return scene


def _js_value(v) -> str:
    return json.dumps(v) if isinstance(v, str) else str(v)


def _command_line(cmd: list) -> str:
    op, args = cmd[0], cmd[1:]
    if op in _CANVAS_PROPS:
        return f"canvas.{op} = {_js_value(args[0])};"
    if op in _CTX_PROPS:
        return f"ctx.{op} = {_js_value(args[0])};"
    if op == "arc":
        return f"ctx.arc({', '.join(_js_value(a) for a in args)}, {_FULL_TURN});"
    if op in _CTX_METHODS:
        return f"ctx.{op}({', '.join(_js_value(a) for a in args)});"
    raise ValueError(f"unknown canvas command {op!r}")


def scene_to_program(scene: list[dict]) -> str:
    """A canvas-2D JavaScript program that draws ``scene`` (one statement per line).

    Raises:
        ValueError: on a command outside the scene vocabulary.
    """
    n_objects = sum(1 for e in scene if e["id"] is not None)
    lines = [f"// Canvas scene with {n_objects} objects.", 'const canvas = document.querySelector("canvas");']
    for entry in scene:
        if entry["id"] is None:
            for cmd in entry["commands"]:
                lines.append(_command_line(cmd))
                if cmd[0] == "height":
                    lines.append('const ctx = canvas.getContext("2d");')
        else:
            lines.append("")
            lines.append(f"// object {entry['id']}")
            lines += [_command_line(cmd) for cmd in entry["commands"]]
    return "\n".join(lines) + "\n"


_OBJECT_RE = re.compile(r"^// object (\S+)$")
_ASSIGN_RE = re.compile(r"^(canvas|ctx)\.(\w+) = (.+);$")
_CALL_RE = re.compile(r"^ctx\.(\w+)\((.*)\);$")
_NUMBER_RE = re.compile(r"^-?\d+(\.\d+)?$")


def _parse_value(text: str):
    text = text.strip()
    if text.startswith('"'):
        return json.loads(text)
    if _NUMBER_RE.match(text):
        return num(float(text)) if "." in text else int(text)
    raise ValueError(f"cannot parse canvas value {text!r}")


def parse_canvas_program(source: str) -> list[dict]:
    """Read a program written by :func:`scene_to_program` back into its scene command list.

    Blank lines, ``const`` declarations and comments other than ``// object <id>`` are
    skipped. Statements before the first object comment form the preamble entry (``id``
    None).

    Raises:
        ValueError: on a statement outside the scene vocabulary.
    """
    scene: list[dict] = [{"id": None, "commands": []}]
    for raw in source.splitlines():
        line = raw.strip()
        if not line or line.startswith("const "):
            continue
        m = _OBJECT_RE.match(line)
        if m:
            scene.append({"id": m.group(1), "commands": []})
            continue
        if line.startswith("//"):
            continue
        m = _ASSIGN_RE.match(line)
        if m and m.group(2) in (_CANVAS_PROPS if m.group(1) == "canvas" else _CTX_PROPS):
            scene[-1]["commands"].append([m.group(2), _parse_value(m.group(3))])
            continue
        m = _CALL_RE.match(line)
        if m and m.group(1) in _CTX_METHODS:
            op, arg_text = m.group(1), m.group(2)
            if op == "arc":
                if not arg_text.endswith(", " + _FULL_TURN):
                    raise ValueError(f"only full-circle arcs are supported: {line!r}")
                arg_text = arg_text[: -len(", " + _FULL_TURN)]
            args = [_parse_value(a) for a in arg_text.split(",")] if arg_text else []
            scene[-1]["commands"].append([op, *args])
            continue
        raise ValueError(f"unsupported canvas statement {line!r}")
    return scene


def _path_outline(path: list[list]) -> tuple:
    """Render outline of a traced path: a single arc/rect, or a closed polygon."""
    if len(path) == 1 and path[0][0] == "arc":
        return ("circle", *path[0][1:])
    if len(path) == 1 and path[0][0] == "rect":
        return ("rect", *path[0][1:])
    if path and path[0][0] == "moveTo" and all(c[0] in ("lineTo", "closePath") for c in path[1:]):
        return ("polygon", tuple((c[1], c[2]) for c in path if c[0] != "closePath"))
    raise ValueError(f"unsupported path {path!r}")


def scene_to_svg(scene: list[dict]) -> str:
    """Translate a scene command list into the SVG document the PNG is rasterized from.

    Canvas state (fill/stroke style, line width, join) carries across entries as in a real
    2D context. Each ``fill``/``stroke`` of the current path becomes one SVG shape (a fill
    followed by a stroke of the same path is one element painted fill-then-stroke, as in
    canvas); ``fillRect`` becomes a ``rect``. The document has no ids.

    Raises:
        ValueError: unknown command, or a path the translator cannot express.
    """
    state = {"fillStyle": "#000000", "strokeStyle": "#000000", "lineWidth": 1, "lineJoin": "miter"}
    size = list(IMAGE_SIZE)
    elements: list[str] = []
    path: list[list] = []
    paint: dict[str, object] = {}

    def flush() -> None:
        if paint:
            elements.append(svg_shape(_path_outline(path), dict(paint)))
            paint.clear()

    for entry in scene:
        for cmd in entry["commands"]:
            op, args = cmd[0], cmd[1:]
            if op in ("width", "height"):
                size[0 if op == "width" else 1] = args[0]
            elif op in _CTX_PROPS:
                state[op] = args[0]
            elif op == "beginPath":
                flush()
                path = []
            elif op in ("arc", "rect", "moveTo", "lineTo", "closePath"):
                flush()
                path = path + [cmd]
            elif op == "fill":
                if "stroke" in paint:
                    flush()
                paint.update({"fill": state["fillStyle"]})
            elif op == "stroke":
                paint.update(
                    {"fill": paint.get("fill", "none"), "stroke": state["strokeStyle"],
                     "stroke-width": state["lineWidth"], "stroke-linejoin": state["lineJoin"]}
                )
            elif op == "fillRect":
                flush()
                elements.append(svg_shape(("rect", *args), {"fill": state["fillStyle"]}))
            else:
                raise ValueError(f"unknown canvas command {op!r}")
        flush()
    # svg_document paints the white background itself; drop the preamble's identical fillRect.
    w, h = size
    if elements and elements[0] == svg_shape(("rect", 0, 0, w, h), {"fill": BACKGROUND}):
        elements = elements[1:]
    return svg_document(elements, (w, h))


def compile_canvas(latent: RelationalLatent, rng: random.Random) -> SurfaceCase:
    """Compile a relational latent into a canvas case.

    Args:
        latent: from :func:`generator.families.relational.sample`.
        rng: the case's own RNG (drawing order, ids, inventory order).

    Returns:
        A :class:`SurfaceCase` with ``format="canvas"``, ``source_type="canvas2d_js"``,
        ``source`` the drawing program, ``render_svg`` its SVG translation, ``scene`` the
        command list both come from, ``image_size=(440, 360)`` and one canonical
        ``canvas_object`` candidate per object (text ``""``, bbox = painted body box).
    """
    order = list(range(len(latent.objects)))
    rng.shuffle(order)  # drawing order
    ids = opaque_ids(rng, "o", len(order))
    scene = build_scene(latent, ids, order)
    candidates = []
    for oid, i in zip(ids, order):
        obj = latent.objects[i]
        body = shape_outline(obj.shape, *cell_center(obj.position))
        candidates.append(Candidate(oid, CANDIDATE_TYPE, "", object_meaning(obj), painted_bbox(body, BODY_STROKE)))
    rng.shuffle(candidates)
    return SurfaceCase(
        format="canvas",
        instruction=instruction_text(latent),
        source_type="canvas2d_js",
        source=scene_to_program(scene),
        candidates=candidates,
        target=target_spec(latent),
        render_svg=scene_to_svg(scene),
        image_size=IMAGE_SIZE,
        scene=scene,
    )
