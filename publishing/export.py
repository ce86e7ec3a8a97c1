"""Hub-ready export of the release (docs/specification.md §2, §10): Parquet per config, card, manifest.

Layout of the export folder::

    README.md                       card (dataset_card.md, generated regions filled) + YAML configs / dataset_info
    eval.yaml                       Hub benchmark registration (publishing.eval_files), one task per config
    exbind_manifest.json            versions, seeds, counts, gate tables, SHA-256 of files
    data/<config>/test-<k>-of-<n>-<sha256[:16]>.parquet   shards (publishing.shards): row groups of 100 rows, page index

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
- streamed: rows go to Parquet shards as they are generated (:mod:`publishing.shards`), so
  memory does not grow with the release size; the suite-level checks run on streamed
  summaries when the last row is written, and a failure leaves the previous export;
- checked before the swap: the offline card / eval.yaml / Parquet / ``load_dataset`` check
  (:func:`publishing.card.check_export`) runs on the finished temporary folder, and a
  failure raises :class:`publishing.card.CardCheckError` and leaves the previous export.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Optional, Union

import datasets
from datasets.info import DatasetInfosDict
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard
from tqdm.auto import tqdm

from publishing.card import CardCheckError, check_export, default_config, fill_regions, generated_regions
from publishing.eval_files import write_eval_yaml
from publishing.shards import ROW_GROUP_SIZE, ConfigShardWriter, sha256_file  # noqa: F401
from generator.records import FEATURES, GENERATOR_VERSION, canonical_row_bytes
from composition.release import CONFIGS, Release, ReleaseRun
from publishing.swap import (MANIFEST_NAME, BuildInterrupted, ExportBusyError, ExportPathError,  # noqa: F401
                             check_export_target, clean_stale, export_lock, install, kept_export, resolve_out,
                             staging_path)

REPO_ROOT = Path(__file__).resolve().parent.parent
CARD_TEMPLATE = Path(__file__).resolve().parent / "dataset_card.md"

DESCRIPTIONS = {
    "broad": "Broad diagnostic suite: 250 cases over six surfaces (svg 25, canvas 50, tree 50, dom 25, graph 50, table 50).",
    "paired": "The 100 broad cases that form 50 cross-format groups (25 svg-canvas, 25 tree-dom).",
    "targeted_table": "Targeted table diagnostic: compact, conjunctive and high-candidate conditions, 40 cases each.",
    "targeted_hierarchy": "Targeted hierarchy diagnostic (tree): repeated-module depth 2, 3 and 4, 40 cases each.",
    "targeted_table_permuted": "Candidate-order control: the 120 targeted table cases under three seeded permutations.",
    "targeted_table_column_metadata": "Column-metadata ablation: the 120 targeted table cases with a column field on every candidate.",
    "legacy_bridge": "Legacy bridge: 300 executable SVG binding tasks on Graphviz gallery graphs with a cached real predictor output each.",
}


def config_description(config: str, release) -> str:
    """A config's ``datasets`` description; a variant release says so first (never confused
    with the default release)."""
    description = DESCRIPTIONS[config]
    if release.variant is not None:
        description = (f"Variant release {release.label} ({release.variant['scale']} times the counts below, "
                       f"seeds {release.seeds}; not the default release). {description}")
    return description


def export_configs(manifest: dict) -> tuple[str, ...]:
    """The configs an export holds, in release order: its manifest's ``configs`` (a subset
    build, ``build --configs``, holds fewer), or every release config for a manifest
    without the list."""
    listed = manifest.get("configs")
    return tuple(c for c in CONFIGS if c in listed) if isinstance(listed, list) and listed else CONFIGS


def canonical_records_hash(rows: Iterable[dict]) -> str:
    """SHA-256 over the canonical JSON of every row (image bytes replaced by their SHA-256;
    :func:`generator.records.canonical_row_bytes`)."""
    h = hashlib.sha256()
    for row in rows:
        h.update(canonical_row_bytes(row))
    return h.hexdigest()


def _counts(counter: Counter) -> dict:
    out: dict = {}
    for (fmt, cond), k in sorted(counter.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
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
    configs = variant.get("configs")
    legacy = "" if configs is not None and "legacy_bridge" not in configs else "; `legacy_bridge` is not scaled"
    only = "" if configs is None else f" It holds only the configs {', '.join(f'`{c}`' for c in configs)}."
    if variant.get("legacy_sha256"):
        only += f" `legacy_bridge` comes from a user's legacy file (SHA-256 {variant['legacy_sha256']})."
    notice = (f"> **Variant release {label}, not the default ExBind release.** Regenerated with `python exbind.py "
              f"build` from {seed} at scale {variant['scale']} ({variant['scale']} times the paper's counts in "
              f"every generated config{legacy}) by generator {variant['generator_version']}.{only} "
              "Figures on it are not comparable with figures on the default release; the seeds are in "
              f"`{MANIFEST_NAME}`. The generated tables below (configurations, gates) are this variant's; "
              "prose that quotes configs or figures describes the default release.\n")
    head, sep, rest = card.text.partition("\n\n")
    if head.lstrip("\n").startswith("# "):  # the title line
        head = f"{head} (variant {label})"
    card.text = f"{head}{sep}{notice}\n{rest}"


def _write_card(out: Path, infos: dict, data_files: dict, regions: dict, configs: Iterable[str],
                variant: Optional[dict] = None, rows: int = 0) -> None:
    """README.md: the template with its generated regions filled, plus YAML configs / dataset_info
    (and the variant notice, :func:`_label_variant`, for a variant release)."""
    card = DatasetCard(fill_regions(CARD_TEMPLATE.read_text(encoding="utf-8"), regions))
    if variant is not None:
        _label_variant(card, variant, rows)
    default = default_config(configs)
    metadata = MetadataConfigs({
        name: {"data_files": [{"split": "test", "path": data_files[name] if len(data_files[name]) > 1
                               else data_files[name][0]}], **({"default": True} if name == default else {})}
        for name in configs
    })
    metadata.to_dataset_card_data(card.data)
    DatasetInfosDict(infos).to_dataset_card_data(card.data)
    (out / "README.md").write_text(str(card), encoding="utf-8")


ReleaseSource = Union[Release, ReleaseRun]


def export_release(out_dir: Path, get_release: Callable[[], ReleaseSource], show_progress: bool = True) -> dict:
    """Build every config and atomically replace ``out_dir`` with the export.

    Args:
        out_dir: export folder; its previous content survives any failure.
        get_release: returns a :class:`~composition.release.ReleaseRun` (streamed: rows are
            generated while they are written, memory stays flat) or an in-memory
            :class:`~composition.release.Release`; gates run inside, and a failing
            suite-level check raises before anything is installed.
        show_progress: tqdm progress bars.

    Returns:
        The manifest dict (also written as ``exbind_manifest.json``).

    Raises:
        ExportPathError: when ``out_dir`` is not exactly a previous export, an empty folder
            or a new path, or cannot be written (checked before any work;
            :func:`publishing.swap.check_export_target`).
        ExportBusyError: another build holds the lock on ``out_dir``.
        BuildInterrupted: Ctrl-C; its ``installed`` says whether the new export was in place.
        composition.release.SuiteCheckError, RuntimeError: from the generator when a gate or
            suite check fails.
        CardCheckError: when the finished export fails the offline card check
            (:func:`publishing.card.check_export`); nothing is swapped in.
    """
    out_dir = resolve_out(out_dir)
    with export_lock(out_dir):
        clean_stale(out_dir)
        check_export_target(out_dir)
        state: dict = {}
        tmp = staging_path(out_dir)
        try:
            os.mkdir(tmp)
            try:
                manifest = _write_export(tmp, out_dir, get_release, show_progress)
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                    raise
                raise ExportPathError(f"cannot write the export at {out_dir}: {os.strerror(exc.errno)}; "
                                      f"{kept_export(out_dir)}; free some space or choose another --out") from None
            try:
                install(tmp, out_dir, state)
            except OSError as exc:  # e.g. an immutable folder: the checked export cannot be renamed into place
                if state.get("installed"):
                    raise
                raise ExportPathError(f"cannot put the new export at {out_dir} ({exc.strerror}); the new export "
                                      "was discarded; choose another --out") from None
        except KeyboardInterrupt:
            shutil.rmtree(tmp, ignore_errors=True)  # the unfinished new export, or the old one after the exchange
            raise BuildInterrupted(out_dir, state.get("installed", False)) from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return manifest


def _dataset_info(config: str, rel: ReleaseSource, writer: ConfigShardWriter, tmp: Path) -> datasets.DatasetInfo:
    """The card's ``dataset_info`` entry of one config (features, split size, file sizes)."""
    info = datasets.DatasetInfo(description=config_description(config, rel), features=FEATURES,
                                license="cc-by-4.0", config_name=config, dataset_name="exbind",
                                version=datasets.Version(rel.label.split("+")[0]))
    info.splits = datasets.SplitDict(dataset_name="exbind")
    info.splits.add(datasets.SplitInfo(name="test", num_bytes=writer.num_bytes, num_examples=writer.rows,
                                       dataset_name="exbind"))
    info.download_size = sum((tmp / f).stat().st_size for f in writer.files)
    info.dataset_size = writer.num_bytes
    return info


def _write_export(tmp: Path, out_dir: Path, get_release: Callable[[], ReleaseSource], show_progress: bool) -> dict:
    """Generate the release and write the complete, checked export into the empty folder ``tmp``."""
    rel = get_release()
    configs = tuple(rel.configs) if isinstance(rel, Release) else rel.configs
    writers = {c: ConfigShardWriter(tmp / "data" / c) for c in configs}
    counters: dict = {c: Counter() for c in configs}
    total = rel.total() if isinstance(rel, ReleaseRun) else sum(len(v) for v in rel.configs.values())
    progress = tqdm(total=total, desc="generate, gate and write", disable=not show_progress or total == 0)
    if isinstance(rel, ReleaseRun):
        rel.progress = progress
    try:
        for config, rec in rel.records():
            row = rec.to_row()
            writers[config].add(row, rec.canonical_line())
            counters[config][(row["format"], row["condition"])] += 1
            if not isinstance(rel, ReleaseRun):
                progress.update(1)
        data_files = {c: writers[c].close(tmp) for c in configs}
    except BaseException:
        for writer in writers.values():  # no Parquet writer left to fail again when collected
            writer.abort()
        raise
    finally:
        progress.close()
    infos = {c: _dataset_info(c, rel, writers[c], tmp) for c in configs}
    counts = {c: {"rows": writers[c].rows, "by_format_condition": _counts(counters[c])} for c in configs}
    record_hashes = {c: writers[c].records_sha256 for c in configs}
    _write_card(tmp, infos, data_files, generated_regions(counts, rel.gate_tables, rel.suite_checks, configs),
                configs, rel.variant, sum(c["rows"] for c in counts.values()))
    write_eval_yaml(tmp, configs)
    manifest = {
        "generator_version": GENERATOR_VERSION,
        "seeds": rel.seeds,
        "release_version": rel.label,
        "variant": rel.variant,
        "configs": list(configs),
        "counts": counts,
        "gate_tables": rel.gate_tables,
        "legacy_bridge_eligibility": rel.legacy_eligibility,
        "suite_checks": rel.suite_checks,
        "canonical_records_sha256": record_hashes,
        "files": {p.relative_to(tmp).as_posix(): sha256_file(p)
                  for p in sorted(tmp.rglob("*")) if p.is_file()},
    }
    (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    problems = check_export(tmp, configs)
    if problems:
        raise CardCheckError(problems, where=f"export to {out_dir}")
    return manifest


def not_an_export(export_dir: os.PathLike | str) -> Optional[str]:
    """The one-line reason ``export_dir`` is not an ExBind export (no card ``README.md`` or no
    manifest), naming the command that builds one; None when both are there."""
    export_dir = Path(export_dir)
    missing = [name for name in ("README.md", MANIFEST_NAME) if not (export_dir / name).is_file()]
    if not missing:
        return None
    return (f"{export_dir}: not an ExBind export (no {' or '.join(missing)}; build one with "
            f"`exbind build --out {export_dir}` (or `python exbind.py build --out {export_dir}` in the repository))")


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
        raise ExportIntegrityError(not_an_export(export_dir))
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
