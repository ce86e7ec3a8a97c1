"""``exbind show CASE_ID``: look at one case the way a model sees it, and at how one
prediction on it is scored.

Prints the instruction, the model-visible candidate rows, gold and, given a prediction,
its status, stage scores, violation set and first violation (the scorer is
:func:`exbind_scoring.score_prediction`, the one the metric uses). For rendered cases
(svg, canvas, legacy) it writes a PNG with every candidate box outlined and labelled with
its id, gold in green and the predicted candidate (when wrong) in red.
"""

from __future__ import annotations

import argparse
import io
import json
import os
from pathlib import Path
from typing import Optional

from exbind_scoring import score_prediction
from composition.release import config_name_error
from generator.files import OutputPathError, cannot_write, check_output_path, write_bytes_atomic

GOLD_COLOUR = (0, 160, 0)
PREDICTED_COLOUR = (220, 0, 0)
OTHER_COLOUR = (40, 90, 220)
# Configs searched when --config is not given (the case id then names a released case).
SEARCH_ORDER = ("broad", "targeted_table", "targeted_hierarchy", "legacy_bridge",
                "targeted_table_permuted", "targeted_table_column_metadata", "paired")


class CaseNotFound(LookupError):
    """The case id is in none of the searched configs of the export."""


def export_path_text(export: str | os.PathLike) -> str:
    """``export`` as a path a ``datasets.load_dataset`` call reads as a folder: ``exbind`` becomes
    ``./exbind`` (a bare name would be looked up on the Hub)."""
    text = str(export)
    return text if os.path.isabs(text) or text.startswith(("./", "../")) or text in (".", "..") else f"./{text}"


def find_case(export: str | os.PathLike, case_id: str, config: Optional[str] = None,
              held: Optional[tuple[str, ...]] = None) -> tuple[str, dict]:
    """The row of ``case_id`` (image included) and the config it was found in.

    Args:
        export: an export folder written by ``exbind build``.
        case_id: a released case id, e.g. ``broad_table_0003__table``.
        config: the config to look in; ``None`` searches :data:`SEARCH_ORDER`.
        held: the configs the export holds (:func:`publishing.export.export_configs` of its
            manifest); the search skips the others (a subset build, ``build --configs``).

    Raises:
        CaseNotFound: no searched config holds that case id.
    """
    import datasets

    searched = [c for c in SEARCH_ORDER if held is None or c in held]
    configs = (config,) if config else tuple(searched or SEARCH_ORDER)
    for name in configs:
        ds = datasets.load_dataset(str(export), name, split="test")
        ids = ds["case_id"]
        if case_id in ids:
            return name, ds[ids.index(case_id)]
    where = f"config {config!r}" if config else "any config"
    path = export_path_text(export)
    raise CaseNotFound(f"case id {case_id!r} is not in {where} of {path}; "
                       f"list ids with: python -c \"import datasets; print(datasets.load_dataset({path!r}, "
                       f"{configs[0]!r}, split='test')['case_id'][:5])\"")


def describe(row: dict, prediction: Optional[str] = None,
             coordinate_frame: Optional[str] = None) -> tuple[str, Optional[dict]]:
    """The text ``exbind show`` prints for one row, and the scored record (or ``None``).

    Args:
        row: a dataset row (``instruction``, ``candidates``, ``gold``, ``reference``, ...).
        prediction: a raw model output to score against the row, or ``None``.
        coordinate_frame: the frame of a click prediction (``"pixel"``, ``"unit"`` or
            ``"thousand"``; :func:`exbind_scoring.score_prediction`), never guessed.
    """
    lines = [
        f"case: {row['case_id']}  format: {row['format']}  family: {row['family']}  "
        f"condition: {'-' if row.get('condition') is None else row['condition']}",
        f"instruction: {row['instruction']}",
        "candidates (as the model sees them):",
    ]
    for cand in row["candidates"]:
        lines.append("  " + json.dumps({k: v for k, v in cand.items() if v is not None}, ensure_ascii=False))
    lines.append(f"gold: {row['gold']}  (gold rank {row['gold_rank']} of {len(row['candidates'])})")
    record = None
    if prediction is not None:
        record = score_prediction(prediction, row["reference"], coordinate_frame=coordinate_frame)
        lines += [
            f"prediction: {prediction!r}",
            f"status: {record['status']}  parse path: {record['parse_path']}"
            + (f"  reason: {record['reason']}" if record.get("reason") else ""),
            f"predicted: {record['predicted']}",
            "scores: " + ", ".join(f"{k}={v}" for k, v in record["scores"].items()),
            f"violations: {record['violations']}",
            f"first violation: {record['first_violation']}  "
            f"(possible under any admissible order: {record['possible_first_violations']})",
        ]
    return "\n".join(lines), record


def draw_boxes(row: dict, record: Optional[dict], out: str | os.PathLike) -> Optional[Path]:
    """Write the row's PNG with every candidate box outlined and its id written above it.

    Gold boxes are green, a wrong predicted candidate red, the others blue. Returns the
    written path, or ``None`` for rows without an image.
    """
    from PIL import Image, ImageDraw

    image = row.get("image")
    if image is None:
        return None
    if isinstance(image, dict):
        image = Image.open(io.BytesIO(image["bytes"]))
    canvas = image.convert("RGB")
    draw = ImageDraw.Draw(canvas)
    gold = set(json.loads(row["gold"]).values())
    predicted = set(record["predicted"].values()) if record and record.get("predicted") else set()
    for cand in row["candidates"]:
        if cand.get("bbox") is None:
            continue
        x, y, w, h = cand["bbox"]
        cid = cand["candidate_id"]
        colour = GOLD_COLOUR if cid in gold else PREDICTED_COLOUR if cid in predicted else OTHER_COLOUR
        draw.rectangle([x, y, x + w, y + h], outline=colour, width=3 if cid in gold else 1)
        draw.text((x + 1, max(0, y - 11)), cid, fill=colour)
    png = io.BytesIO()
    canvas.save(png, format="PNG")
    return write_bytes_atomic(out, png.getvalue())


def add_parser(sub) -> argparse.ArgumentParser:
    """Register ``show`` on the top-level subparsers."""
    show = sub.add_parser(
        "show", help="print one case (instruction, candidates, gold) and how a prediction on it is scored",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  exbind show broad_table_0003__table --prediction '{\"cell_id\": \"cell_r01_c02\"}'\n",
    )
    show.add_argument("case_id")
    show.add_argument("--config", default=None, help="config to look in (default: search every config)")
    show.add_argument("--export", default="exbind", help="export folder (default ./exbind)")
    show.add_argument("--prediction", default=None, help="a raw model output to score against the case")
    show.add_argument("--coordinate-frame", choices=("pixel", "unit", "thousand"), default=None,
                      help="frame of a click prediction ({\"x\": .., \"y\": ..}); never guessed")
    show.add_argument("--png", default=None,
                      help="where to write the annotated PNG of a rendered case (default ./<case_id>.png)")
    return show


def _other_file(path: str) -> bool:
    """Whether ``path`` is an existing file that is not a PNG (``show`` replaces only PNGs:
    a mistyped ``--png preds.jsonl`` must not destroy the predictions)."""
    from PIL import Image, UnidentifiedImageError

    if not os.path.isfile(path):  # absent, or not a regular file (the write refuses those)
        return False
    try:
        with Image.open(path) as image:  # reads the header only
            return image.format != "PNG"
    except UnidentifiedImageError:
        return True
    except OSError:  # unreadable: the write reports it
        return False


def run(args) -> int:
    """Run ``exbind show``; exit status 0, or 2 when the export or case is missing or ``--png`` cannot be written."""
    import datasets

    if args.png is not None:
        try:
            check_output_path("--png", args.png, export=args.export)
        except OutputPathError as exc:
            print(f"show: {exc}")
            return 2
    png_path = args.png or f"{args.case_id}.png"
    if _other_file(png_path):
        print(f"show: --png {png_path} exists and is not a PNG; refusing to replace it (choose another path)")
        return 2
    if not (Path(args.export) / "exbind_manifest.json").is_file():
        print(f"show: {args.export!r} is not an ExBind export; build one with: exbind build --out {args.export}")
        return 2
    config_error = config_name_error("--config", args.config)
    if config_error:
        print(f"show: {config_error}")
        return 2
    datasets.disable_progress_bars()
    from publishing.export import ExportIntegrityError, export_configs, verify_export

    try:  # the files the manifest hashes, before any is read (a damaged Parquet may still load)
        manifest = verify_export(args.export, None if args.config is None else (args.config,))
    except ExportIntegrityError as exc:
        print(f"show: {exc}")
        return 2
    try:
        config, row = find_case(args.export, args.case_id, args.config, export_configs(manifest))
    except CaseNotFound as exc:
        print(f"show: {exc}")
        return 2
    except ValueError as exc:  # unknown config name
        print(f"show: {exc}")
        return 2
    except Exception as exc:  # noqa: BLE001 - a damaged export: datasets/pyarrow raise many types
        print(f"show: cannot read {export_path_text(args.export)} ({type(exc).__name__}: {str(exc)[:200]}); "
              f"check it with: exbind score --config <config> --predictions <file> --export {args.export} "
              f"(it verifies every file), or rebuild it with: exbind build --out {args.export}")
        return 2
    text, record = describe(row, args.prediction, args.coordinate_frame)
    print(f"config: {config}\n{text}")
    if record is not None and args.coordinate_frame is None and record.get("kind") == "click":
        print("hint: this prediction is a click; pass --coordinate-frame pixel|unit|thousand to score it")
    try:
        png = draw_boxes(row, record, png_path)
    except OSError as exc:  # the default ./<case_id>.png, or a path that turned unwritable after the check
        print(f"show: {cannot_write('--png', png_path, exc.strerror or type(exc).__name__)}")
        return 2
    if png is not None:
        legend = "gold green, wrong prediction red" if args.prediction is not None else "gold green"
        print(f"wrote {png} (candidate boxes; {legend})")
    return 0
