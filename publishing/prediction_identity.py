"""Prediction lines that cannot be mixed up (issue 10 item 5).

Every prediction line the project writes (``run-model``, ``predict``) carries the config it
answers and the export's records hash (``canonical_records_sha256[config]`` of
``exbind_manifest.json``)::

    {"case_id": "...", "config": "targeted_table", "records_hash": "<64 hex>", "output": "...", ...}

:func:`check_prediction_identity` is what ``exbind.py score`` applies: lines that carry the
fields must match the config and the export being scored (``targeted_table`` and
``targeted_table_column_metadata`` share case ids, so ids alone cannot tell them apart);
lines without them (users' own files in the older format) are accepted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Optional, Sequence

IDENTITY_FIELDS = ("config", "records_hash")


class PredictionIdentityError(ValueError):
    """Prediction lines made on another config or another build; the message names both."""


def records_hash(export_dir, config: str) -> Optional[str]:
    """``canonical_records_sha256[config]`` of an export's ``exbind_manifest.json`` (None when
    the manifest or the config entry is absent)."""
    path = Path(export_dir) / "exbind_manifest.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("canonical_records_sha256", {}).get(config)
    except (OSError, ValueError):
        return None


def identity_fields(export_dir, config: str) -> dict:
    """``{"config": config, "records_hash": ...}`` to put on every prediction line."""
    return {"config": config, "records_hash": records_hash(export_dir, config)}


def check_prediction_identity(lines: Sequence[Mapping], config: str, expected_hash: Optional[str],
                              source: str = "predictions", config_option: str = "--config") -> dict:
    """Refuse predictions made on another config or build.

    Args:
        lines: prediction dicts (only ``config`` / ``records_hash`` are read).
        config: the config being scored.
        expected_hash: the export's records hash of ``config`` (None: not checked).
        source: the file name, for messages.
        config_option: the option that names ``config`` (``--config``, or ``--compare-config``
            for the second file of a comparison), for the fix the message suggests.

    Returns:
        ``{"with_identity": n, "without_identity": n}`` (lines carrying ``config``, and
        old-format lines without it, which are accepted).

    Raises:
        PredictionIdentityError: a line names another config, or another records hash
            (the message gives the first offending case id, both values and the fix).
    """
    with_id = 0
    for line in lines:
        got_config = line.get("config")
        got_hash = line.get("records_hash")
        if got_config is None and got_hash is None:
            continue
        with_id += 1
        if got_config is not None and got_config != config:
            raise PredictionIdentityError(
                f"{source}: case {line.get('case_id')!r} was predicted on config {got_config!r}, not {config!r} "
                f"(score it with {config_option} {got_config}, or rerun the model on {config})")
        if got_hash is not None and expected_hash is not None and got_hash != expected_hash:
            raise PredictionIdentityError(
                f"{source}: case {line.get('case_id')!r} was predicted on another build of {config!r}: "
                f"records_hash {got_hash} in the file, {expected_hash} in the export "
                "(rerun the model on this export; scores are not comparable)")
    return {"with_identity": with_id, "without_identity": len(lines) - with_id}
