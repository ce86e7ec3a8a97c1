"""Reading config rows and writing predictions files (docs/specification.md §9; issue 4).

A predictions file is JSON Lines, one object per case, in the config's row order::

    {"case_id": "...", "output": "<raw output text>", "predictor": "rank_bm25", ...}

``output`` is what the scorer parses (``python exbind.py score --predictions FILE``);
other keys (``predictor``, ``ranking``, ``min_rank``, ...) are informational and the
scorer ignores them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

from generator.files import write_atomic


def load_config_rows(export: str | os.PathLike, config: str) -> list[dict]:
    """The rows of one config of an export folder, without the image column.

    Args:
        export: the export folder written by ``python exbind.py build`` (e.g. ``./exbind``).
        config: a config name (``broad``, ``targeted_table``, ...).

    Returns:
        ``[row dict]`` in released order (keys as in the dataset: ``case_id``,
        ``instruction``, ``reference``, ...; ``image`` dropped).

    Raises:
        FileNotFoundError: when ``export`` is not a folder.
        ValueError: from ``datasets`` when the config does not exist in the export.
    """
    import datasets

    path = Path(export)
    if not path.is_dir():
        raise FileNotFoundError(f"export folder {str(path)!r} does not exist; build one with `exbind build --out {path}` first")
    ds = datasets.load_dataset(str(path), config, split="test")
    if "image" in ds.column_names:
        ds = ds.remove_columns(["image"])
    return list(ds)


def per_case_row(record: dict, output, reference: str) -> dict:
    """A per-case record as the project writes it to files: the scorer's record
    (:func:`exbind_scoring.score_prediction`) plus ``gold`` (the surface reference, keyed like
    the output schema) and ``output`` (the raw model output as given), so error analysis
    needs no join with the dataset (docs/scoring.md §1).

    Args:
        record: the scorer's per-case record.
        output: the raw output that was scored (``""`` for a missing prediction).
        reference: the row's ``reference`` JSON string.
    """
    return {**record, "gold": json.loads(reference)["gold"], "output": output}


def write_jsonl(path: str | os.PathLike, predictions: Iterable[dict]) -> Path:
    """Write prediction dicts as JSON Lines, atomically (temporary file + ``os.replace``).

    A reader never sees a half-written file: either the previous file or the complete new
    one, with the mode ``open`` gives (:func:`generator.files.write_atomic`). Parent folders
    are created.

    Args:
        path: destination file.
        predictions: JSON-serializable dicts (one line each, keys in insertion order,
            UTF-8, no NaN; see :func:`json_line` for text that UTF-8 cannot encode).

    Returns:
        The destination path.

    Raises:
        ValueError / TypeError: a prediction is not JSON-serializable (the destination is
            left untouched and the temporary file removed).
        OSError: the folder cannot be written, or ``path`` is a symbolic link, device, FIFO
            or socket (:func:`generator.files.write_atomic`).
    """
    def fill(fh) -> None:
        for pred in predictions:
            fh.write(json_line(pred).encode("utf-8"))

    return write_atomic(path, fill)


def json_line(obj) -> str:
    """One JSON Lines line (with its newline) that always encodes as UTF-8.

    Text is written as is (``ensure_ascii=False``) unless the object holds a string UTF-8
    cannot encode (a lone surrogate such as ``"\\ud800"``, which a parsed model output can
    carry); that line is then written with ASCII escapes (``"\\ud800"``), which every JSON
    reader turns back into the same string (issue 11 item 7).

    Raises:
        ValueError / TypeError: ``obj`` is not JSON-serializable (NaN included).
    """
    line = json.dumps(obj, ensure_ascii=False, allow_nan=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(obj, ensure_ascii=True, allow_nan=False)
    return line + "\n"


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Read a JSON Lines file written by :func:`write_jsonl` (blank lines skipped)."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
