"""Hub-ready export of the release (docs/specification.md §2, §10): Parquet per config, card, manifest.

Layout of the export folder::

    README.md                       card (dataset_card.md, generated regions filled) + YAML configs / dataset_info
    eval.yaml                       Hub benchmark registration (publishing.eval_files), one task per config
    exbind_manifest.json            versions, seeds, counts, gate tables, SHA-256 of files
    data/<config>/test-00000-of-00001-<sha256[:16]>.parquet   row groups of 100 rows, page index

Guarantees:
- safe and atomic (:mod:`publishing.swap`): only an empty folder or exactly a previous
  export is replaced; the build holds an exclusive lock on the output; everything is
  written to a sibling staging folder and exchanged with the output in one system call,
  so a failed, interrupted or killed build leaves the previous export (or the complete
  new one) at the path, and leftovers of dead builds are removed by the next build;
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
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Optional

import datasets
import pyarrow.parquet as pq
from datasets.info import DatasetInfosDict
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard
from tqdm.auto import tqdm

from publishing.card import VIEWER_ROW_GROUP_SIZE, CardCheckError, check_export, fill_regions, generated_regions
from publishing.eval_files import write_eval_yaml
from generator.records import GENERATOR_VERSION
from composition.release import CONFIGS, Release
from publishing.swap import (MANIFEST_NAME, ExportBusyError, ExportPathError, check_export_target, cache_dir,
                             clean_stale, export_lock, install, make_staging_dir, resolve_out)

REPO_ROOT = Path(__file__).resolve().parent.parent
CARD_TEMPLATE = Path(__file__).resolve().parent / "dataset_card.md"
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


_SIZE_CATEGORIES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                    (10_000_000, "1M<n<10M"))


def size_category(rows: int) -> str:
    """The Hub ``size_categories`` id for a total row count (e.g. 1,370 -> ``"1K<n<10K"``)."""
    return next((name for limit, name in _SIZE_CATEGORIES if rows < limit), "10M<n<100M")


def _label_variant(card: DatasetCard, variant: dict, rows: int) -> None:
    """Mark a variant release's card: title, tag, size category and a notice under the heading."""
    label = variant["label"]
    card.data.pretty_name = f"ExBind variant {label}"
    card.data.size_categories = [size_category(rows)]
    card.data.tags = list(card.data.tags or []) + ["exbind-variant"]
    seed = "the default seeds" if variant["seed"] is None else f"user seed {variant['seed']}"
    notice = (f"> **Variant release {label}, not the default ExBind release.** Regenerated with `python exbind.py "
              f"build` from {seed} at scale {variant['scale']} ({variant['scale']} times the paper's counts in "
              f"every generated config; `legacy_bridge` is not scaled) by generator {variant['generator_version']}. "
              "Figures on it are not comparable with figures on the default release; the seeds are in "
              f"`{MANIFEST_NAME}`.\n")
    head, sep, rest = card.text.partition("\n\n")
    card.text = f"{head}{sep}{notice}\n{rest}"


def _write_card(out: Path, infos: dict, data_files: dict, regions: dict, variant: Optional[dict] = None,
                rows: int = 0) -> None:
    """README.md: the template with its generated regions filled, plus YAML configs / dataset_info
    (and the variant notice, :func:`_label_variant`, for a variant release)."""
    card = DatasetCard(fill_regions(CARD_TEMPLATE.read_text(encoding="utf-8"), regions))
    if variant is not None:
        _label_variant(card, variant, rows)
    configs = MetadataConfigs({
        name: {"data_files": [{"split": "test", "path": data_files[name]}], **({"default": True} if name == "broad" else {})}
        for name in CONFIGS
    })
    configs.to_dataset_card_data(card.data)
    DatasetInfosDict(infos).to_dataset_card_data(card.data)
    (out / "README.md").write_text(str(card), encoding="utf-8")


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
        ExportPathError: when ``out_dir`` is not exactly a previous export, an empty folder
            or a new path, or cannot be written (checked before any work;
            :func:`publishing.swap.check_export_target`).
        ExportBusyError: another build holds the lock on ``out_dir``.
        BuildInterrupted: Ctrl-C; its ``installed`` says whether the new export was in place.
        RuntimeError: from the generator when a gate or suite check fails.
        CardCheckError: when the finished export fails the offline card check
            (:func:`publishing.card.check_export`); nothing is swapped in.
    """
    out_dir = resolve_out(out_dir)
    with export_lock(out_dir):
        clean_stale(out_dir)
        check_export_target(out_dir)
        state: dict = {}
        tmp = make_staging_dir(out_dir)
        try:
            manifest = _write_export(tmp, out_dir, builder_cls, get_release, show_progress)
            install(tmp, out_dir, state)
        except KeyboardInterrupt:
            shutil.rmtree(tmp, ignore_errors=True)  # the unfinished new export, or the old one after the exchange
            raise BuildInterrupted(out_dir, state.get("installed", False)) from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        finally:
            builder_cls.active_release = None
    return manifest


class BuildInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`export_release`; ``installed`` says whether the new export was already in place."""

    def __init__(self, out_dir: Path, installed: bool):
        super().__init__(str(out_dir))
        self.out_dir, self.installed = out_dir, installed

    def message(self) -> str:
        """One line for the user (the command exits 130)."""
        if self.installed:
            return f"build interrupted after the new export was installed at {self.out_dir}"
        return f"build interrupted; the previous export at {self.out_dir} is untouched"


def _write_export(tmp: Path, out_dir: Path, builder_cls, get_release: Callable[[], Release],
                  show_progress: bool) -> dict:
    """Generate the release and write the complete, checked export into the empty folder ``tmp``."""
    rel = get_release()
    datasets.disable_progress_bars()
    infos, data_files = {}, {}
    counts, record_hashes = {}, {}
    with cache_dir() as cache_root:
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
    _write_card(tmp, infos, data_files, generated_regions(counts, rel.gate_tables, rel.suite_checks, CONFIGS),
                rel.variant, sum(c["rows"] for c in counts.values()))
    write_eval_yaml(tmp, CONFIGS)
    manifest = {
        "generator_version": GENERATOR_VERSION,
        "seeds": rel.seeds,
        "release_version": rel.label,
        "variant": rel.variant,
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
    return manifest


class ExportIntegrityError(ValueError):
    """An export folder that must not be read: no manifest, or files that differ from it."""


def verify_export(export_dir: os.PathLike | str, configs: Optional[Iterable[str]] = None) -> dict:
    """Check an export against its manifest before scoring or predicting on it (issue 11 item 5).

    Hashes (SHA-256) the card ``README.md`` (it maps each config to its Parquet file) and
    every manifest-listed file under ``data/<config>/`` of the requested configs (every
    listed file when ``configs`` is None). A config the manifest does not know is skipped:
    loading it fails later with its own message. This catches files edited in place
    (a valid Parquet with rewritten golds) and corrupted files; it is not a signature
    (whoever can rewrite the manifest too can forge an export).

    Args:
        export_dir: a folder written by ``python exbind.py build``.
        configs: the config names about to be read, or None for all.

    Returns:
        The parsed manifest.

    Raises:
        ExportIntegrityError: the folder is not an export (no manifest), the manifest does
            not parse, or files are missing or differ (the message names each one).
    """
    export_dir = Path(export_dir)
    rebuild = f"rebuild it with `python exbind.py build --out {export_dir}`"
    path = export_dir / MANIFEST_NAME
    if not path.is_file():
        raise ExportIntegrityError(f"{export_dir}: not an ExBind export (no {MANIFEST_NAME}; "
                                   f"build one with `exbind build --out {export_dir}` (or `python exbind.py build --out {export_dir}` in the repository))")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        files = manifest["files"]
        if not isinstance(files, dict):
            raise TypeError('"files" is not an object')
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
        raise ExportIntegrityError(f"{path}: not a valid export manifest ({type(exc).__name__}: {exc}); "
                                   f"{rebuild}") from None
    if configs is None:
        wanted = sorted(files)
    else:
        prefixes = tuple(f"data/{c}/" for c in configs)
        wanted = sorted(rel for rel in files if rel == "README.md" or rel.startswith(prefixes))
    missing = [rel for rel in wanted if not (export_dir / rel).is_file()]
    changed = [rel for rel in wanted if rel not in missing and sha256_file(export_dir / rel) != files[rel]]
    if missing or changed:
        parts = ([f"{rel} (SHA-256 differs from the manifest: modified or corrupted since the build)"
                  for rel in changed] + [f"{rel} (missing)" for rel in missing])
        raise ExportIntegrityError(f"{export_dir}: {len(parts)} file(s) do not match {MANIFEST_NAME}: "
                                   f"{'; '.join(parts)}; refusing to read the export. Restore the files or {rebuild}")
    return manifest


def verify_manifest(out_dir: Path) -> list[str]:
    """Files whose SHA-256 differs from the manifest (empty when the export is intact)."""
    out_dir = Path(out_dir)
    manifest = json.loads((out_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
    bad = [rel for rel, digest in manifest["files"].items()
           if not (out_dir / rel).is_file() or sha256_file(out_dir / rel) != digest]
    present = {p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*") if p.is_file()} - {MANIFEST_NAME}
    bad += sorted(present - set(manifest["files"]))
    return bad
