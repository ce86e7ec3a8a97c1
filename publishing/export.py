"""Hub-ready export of the release (SPEC §2, §10): Parquet per config, card, manifest.

Layout of the export folder::

    README.md                       card (dataset_card.md, generated regions filled) + YAML configs / dataset_info
    eval.yaml                       Hub benchmark registration (publishing.eval_files), one task per config
    exbind_manifest.json            versions, seeds, counts, gate tables, SHA-256 of files
    data/<config>/test-00000-of-00001-<sha256[:16]>.parquet   row groups of 100 rows, page index

Guarantees:
- atomic: everything is written to a sibling temporary folder and swapped in with
  ``os.replace`` at the end, so a failed build leaves the previous export untouched;
- deterministic: the same seeds give byte-identical Parquet, README and manifest (no
  timestamps; rows come from seeded generation in plan order);
- fresh reloads: the YAML ``data_files`` name the content-addressed Parquet file itself,
  so ``load_dataset`` on a rebuilt export with new content never serves cached old rows;
- every config is materialized by the ``datasets`` builder in a fresh cache directory;
- checked before the swap: the offline card / eval.yaml / Parquet / ``load_dataset`` check
  (:func:`publishing.card.check_export`) runs on the finished temporary folder, and a
  failure raises :class:`publishing.card.CardCheckError` and leaves the previous export.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Callable

import datasets
import pyarrow.parquet as pq
from datasets.info import DatasetInfosDict
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard
from tqdm.auto import tqdm

from publishing.card import VIEWER_ROW_GROUP_SIZE, CardCheckError, check_export, fill_regions, generated_regions
from publishing.eval_files import write_eval_yaml
from generator.records import GENERATOR_VERSION
from composition.release import CONFIGS, PERMUTATION_SEEDS, Release

REPO_ROOT = Path(__file__).resolve().parent.parent
CARD_TEMPLATE = Path(__file__).resolve().parent / "dataset_card.md"
MANIFEST_NAME = "exbind_manifest.json"
ROW_GROUP_SIZE = VIEWER_ROW_GROUP_SIZE  # 100: small row groups keep image configs viewer-friendly


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def canonical_records_hash(rows: list[dict]) -> str:
    """SHA-256 over the canonical JSON of every row (image bytes replaced by their SHA-256)."""
    h = hashlib.sha256()
    for row in rows:
        row = dict(row)
        image = row.get("image")
        if image is not None:
            data = image["bytes"] if isinstance(image, dict) else image
            row["image"] = hashlib.sha256(data).hexdigest()
        h.update(json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


def _materialize(builder_cls, config: str, cache_dir: str) -> datasets.Dataset:
    builder = builder_cls(config_name=config, cache_dir=cache_dir)
    builder.download_and_prepare(download_mode=datasets.DownloadMode.FORCE_REDOWNLOAD)
    return builder.as_dataset(split="test")


def _counts(ds: datasets.Dataset) -> dict:
    counts: Counter = Counter(zip(ds["format"], ds["condition"]))
    out: dict = {}
    for (fmt, cond), k in sorted(counts.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        out.setdefault(fmt, {})[cond or "none"] = k
    return out


def _write_card(out: Path, infos: dict, data_files: dict, regions: dict) -> None:
    """README.md: the template with its generated regions filled, plus YAML configs / dataset_info."""
    card = DatasetCard(fill_regions(CARD_TEMPLATE.read_text(encoding="utf-8"), regions))
    configs = MetadataConfigs({
        name: {"data_files": [{"split": "test", "path": data_files[name]}], **({"default": True} if name == "broad" else {})}
        for name in CONFIGS
    })
    configs.to_dataset_card_data(card.data)
    DatasetInfosDict(infos).to_dataset_card_data(card.data)
    (out / "README.md").write_text(str(card), encoding="utf-8")


class ExportPathError(ValueError):
    """The export folder would overwrite something that is not a previous ExBind export."""


def check_export_target(out_dir: Path) -> Path:
    """Refuse an export path that would destroy anything but a previous export.

    Args:
        out_dir: requested export folder.

    Returns:
        The resolved path.

    Raises:
        ExportPathError: when the path is a file, a non-empty folder without
            ``exbind_manifest.json``, or contains the current folder or this repository.
    """
    out = Path(out_dir).resolve()
    protected = {Path.cwd().resolve(), REPO_ROOT}
    if any(p == out or out in p.parents for p in protected):
        raise ExportPathError(f"--out {out_dir!s} contains the working folder or the repository; "
                              "choose a dedicated folder such as ./exbind")
    if out.exists() and not out.is_dir():
        raise ExportPathError(f"--out {out_dir!s} is an existing file; choose a folder path")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST_NAME).is_file():
        raise ExportPathError(f"--out {out_dir!s} is a non-empty folder that is not an ExBind export "
                              f"(no {MANIFEST_NAME}); refusing to replace it. Choose an empty or new folder")
    return out


def export_release(out_dir: Path, builder_cls, get_release: Callable[[], Release], show_progress: bool = True) -> dict:
    """Build every config and atomically replace ``out_dir`` with the export.

    Args:
        out_dir: export folder; its previous content survives any failure.
        builder_cls: the ``datasets`` builder class (``exbind.ExBind``).
        get_release: returns the generated :class:`~composition.release.Release` (gates run
            inside; a failing suite-level check raises before anything is written).
        show_progress: tqdm progress bars.

    Returns:
        The manifest dict (also written as ``exbind_manifest.json``).

    Raises:
        ExportPathError: when ``out_dir`` is not a previous export, an empty folder or a
            new path (checked before any work).
        RuntimeError: from the generator when a gate or suite check fails.
        CardCheckError: when the finished export fails the offline card check
            (:func:`publishing.card.check_export`); nothing is swapped in.
    """
    out_dir = check_export_target(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    rel = get_release()
    datasets.disable_progress_bars()
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        infos, data_files = {}, {}
        counts, record_hashes = {}, {}
        with tempfile.TemporaryDirectory(prefix="exbind-cache-") as cache_root:
            builder_cls.active_release = rel
            for config in tqdm(CONFIGS, desc="export configs", disable=not show_progress):
                ds = _materialize(builder_cls, config, os.path.join(cache_root, config))
                folder = tmp / "data" / config
                folder.mkdir(parents=True)
                staging = folder / "staging.parquet"
                pq.write_table(ds.data.table, staging, row_group_size=ROW_GROUP_SIZE, write_page_index=True,
                               compression="zstd")
                digest = sha256_file(staging)
                name = f"test-00000-of-00001-{digest[:16]}.parquet"
                os.replace(staging, folder / name)
                data_files[config] = f"data/{config}/{name}"
                info = ds.info.copy()
                info.config_name = config
                infos[config] = info
                counts[config] = {"rows": ds.num_rows, "by_format_condition": _counts(ds)}
                record_hashes[config] = canonical_records_hash(list(ds.cast_column("image", datasets.Image(decode=False))))
            builder_cls.active_release = None
        _write_card(tmp, infos, data_files, generated_regions(counts, rel.gate_tables, rel.suite_checks, CONFIGS))
        write_eval_yaml(tmp, CONFIGS)
        manifest = {
            "generator_version": GENERATOR_VERSION,
            "seeds": {**rel.seeds, "permutations": list(PERMUTATION_SEEDS)},
            "configs": list(CONFIGS),
            "counts": counts,
            "gate_tables": rel.gate_tables,
            "legacy_bridge_eligibility": rel.legacy_eligibility,
            "suite_checks": rel.suite_checks,
            "canonical_records_sha256": record_hashes,
            "files": {p.relative_to(tmp).as_posix(): sha256_file(p)
                      for p in sorted(tmp.rglob("*")) if p.is_file()},
        }
        (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        problems = check_export(tmp, CONFIGS)
        if problems:
            raise CardCheckError(problems, where=f"export to {out_dir}")
        _swap_in(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        builder_cls.active_release = None
    return manifest


def _swap_in(tmp: Path, out_dir: Path) -> None:
    """Replace ``out_dir`` by ``tmp`` with renames only (the old folder is removed last)."""
    old = None
    if out_dir.exists():
        old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
        os.replace(out_dir, old)
    os.replace(tmp, out_dir)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def verify_manifest(out_dir: Path) -> list[str]:
    """Files whose SHA-256 differs from the manifest (empty when the export is intact)."""
    out_dir = Path(out_dir)
    manifest = json.loads((out_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
    bad = [rel for rel, digest in manifest["files"].items()
           if not (out_dir / rel).is_file() or sha256_file(out_dir / rel) != digest]
    present = {p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*") if p.is_file()} - {MANIFEST_NAME}
    bad += sorted(present - set(manifest["files"]))
    return bad
