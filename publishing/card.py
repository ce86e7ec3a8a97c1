"""The dataset card: generated regions and the offline check of an export (issue 5).

Two jobs:

1. **Fill the card.** ``dataset_card.md`` carries generated regions between
   ``<!-- exbind:begin NAME -->`` and ``<!-- exbind:end NAME -->`` lines. The export
   replaces them from the release it writes (:func:`fill_regions`): ``configs`` (rows per
   config, format and condition, from the manifest counts) and ``gates`` (the gate table per
   suite, paper Table 6 form, and the suite-level checks). The repository's template keeps
   the last filled text, so it reads complete on its own; a test asserts that it matches a
   fresh export.

2. **Check an export offline** (:func:`check_export`, run by the export before the atomic
   swap and by ``push`` before uploading). It returns a list of problems (empty = valid):

   - card: the YAML front matter parses; ``license`` is a Hub license id
     (:data:`HUB_LICENSE_IDS`); every ``task_categories`` entry is a Hub task id
     (:data:`HUB_TASK_CATEGORY_IDS`); ``size_categories``, ``language``,
     ``language_creators``, ``annotations_creators`` and ``multilinguality`` use the
     vocabularies that ``datasets`` ships (``datasets/utils/resources/*.json``); the
     required sections (:data:`REQUIRED_SECTIONS`) are present and every feature is named in
     the ``## Fields`` section; no generated region is left unfilled;
   - ``configs`` / ``dataset_info``: both blocks round-trip unchanged through ``datasets``'
     own classes (:class:`datasets.utils.metadata.MetadataConfigs`,
     :class:`datasets.info.DatasetInfosDict`); the configs are exactly the expected names,
     none is named ``default``, exactly one (``broad``) has ``default: true``; every config
     names existing ``data_files`` and has a ``dataset_info`` entry with features;
   - ``eval.yaml`` (:func:`publishing.eval_files.eval_yaml_problems`);
   - Parquet (viewer-ready, :func:`parquet_problems`): row groups of
     :data:`VIEWER_ROW_GROUP_SIZE` rows (the last one smaller), the ``huggingface`` schema
     metadata present and declaring the card's features, an offset index on every column
     chunk and a column index on every chunk except the long-value columns
     (:data:`LONG_VALUE_COLUMNS`);
   - loading: ``datasets.load_dataset(folder, config, split="test")`` in a fresh cache
     directory works for every config and gives the card's features and row count
     (:func:`publishing.load_check.load_problems`, the configs in parallel processes).

The check raises nothing itself; :func:`assert_export_valid` raises :class:`CardCheckError`
listing every problem.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterable, Optional

import datasets
import pyarrow.parquet as pq
import yaml
from datasets.info import DatasetInfosDict
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard, DatasetCardData

from exbind_scoring import OUTPUT_KEYS
from publishing.eval_files import eval_yaml_problems
from publishing.load_check import load_problems

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built with it

# --------------------------------------------------------------------------- Hub vocabularies

# License identifiers the Hub accepts in a card's `license:` field. Vendored from the table in
# huggingface/hub-docs, docs/hub/repositories-licenses.md (commit 008d54d08fd9), region
# "licenses"; huggingface_hub does not ship this list. Extend it when the Hub adds ids.
HUB_LICENSE_IDS = frozenset({
    "apache-2.0", "mit", "openrail", "bigscience-openrail-m", "creativeml-openrail-m",
    "bigscience-bloom-rail-1.0", "bigcode-openrail-m", "afl-3.0", "artistic-2.0", "bsl-1.0",
    "bsd", "bsd-2-clause", "bsd-3-clause", "bsd-3-clause-clear", "c-uda", "cc", "cc0-1.0",
    "cc-by-2.0", "cc-by-2.5", "cc-by-3.0", "cc-by-4.0", "cc-by-sa-3.0", "cc-by-sa-4.0",
    "cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0", "cc-by-nd-4.0", "cc-by-nc-nd-3.0",
    "cc-by-nc-nd-4.0", "cc-by-nc-sa-2.0", "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0",
    "cdla-sharing-1.0", "cdla-permissive-1.0", "cdla-permissive-2.0", "wtfpl", "ecl-2.0",
    "epl-1.0", "epl-2.0", "etalab-2.0", "eupl-1.1", "agpl-3.0", "gfdl", "gpl", "gpl-2.0",
    "gpl-3.0", "lgpl", "lgpl-2.1", "lgpl-3.0", "isc", "lppl-1.3c", "ms-pl", "mpl-2.0", "odc-by",
    "odbl", "openrail++", "osl-3.0", "postgresql", "ofl-1.1", "ncsa", "unlicense", "zlib",
    "pddl", "lgpl-lr", "deepfloyd-if-license", "llama2", "gemma", "unknown", "other",
})

# Task ids the Hub accepts in `task_categories:` (its pipeline taxonomy). Vendored from the
# keys of PIPELINE_DATA in huggingface/huggingface.js, packages/tasks/src/pipelines.ts
# (commit 2c3c6c29b4f4); huggingface_hub does not ship this list. Later Hub versions add
# ids (this snapshot is a subset); extend it when a card needs a newer one.
HUB_TASK_CATEGORY_IDS = frozenset({
    "text-classification", "token-classification", "table-question-answering",
    "question-answering", "zero-shot-classification", "translation", "summarization",
    "feature-extraction", "text-generation", "text2text-generation", "fill-mask",
    "sentence-similarity", "text-to-speech", "text-to-audio", "automatic-speech-recognition",
    "audio-to-audio", "audio-classification", "voice-activity-detection", "depth-estimation",
    "image-classification", "object-detection", "image-segmentation", "text-to-image",
    "image-to-text", "image-to-image", "image-to-video", "unconditional-image-generation",
    "video-classification", "reinforcement-learning", "robotics", "tabular-classification",
    "tabular-regression", "tabular-to-text", "table-to-text", "multiple-choice",
    "text-retrieval", "time-series-forecasting", "text-to-video", "image-text-to-text",
    "visual-question-answering", "document-question-answering", "zero-shot-image-classification",
    "graph-ml", "mask-generation", "zero-shot-object-detection", "text-to-3d", "image-to-3d",
    "image-feature-extraction", "video-text-to-text", "keypoint-detection", "other",
})


def _datasets_vocabulary(name: str):
    path = Path(datasets.__file__).resolve().parent / "utils" / "resources" / name
    return json.loads(path.read_text(encoding="utf-8"))


# Vocabularies `datasets` ships with its card tooling (datasets/utils/resources/).
SIZE_CATEGORIES = tuple(_datasets_vocabulary("size_categories.json"))
LANGUAGE_CODES = frozenset(_datasets_vocabulary("languages.json"))
_CREATORS = _datasets_vocabulary("creators.json")
MULTILINGUALITIES = frozenset(_datasets_vocabulary("multilingualities.json"))

# --------------------------------------------------------------------------- card layout

DEFAULT_CONFIG = "broad"


def default_config(configs: Iterable[str]) -> str:
    """The config marked ``default: true``: ``broad``, or the first one of a build without it."""
    configs = list(configs)
    return DEFAULT_CONFIG if DEFAULT_CONFIG in configs or not configs else configs[0]
VIEWER_ROW_GROUP_SIZE = 100  # rows per Parquet row group (the viewer reads image configs by row group)
# Leaf columns whose values can exceed the Parquet writer's 4 KiB page-statistics limit (PNG
# bytes, long prompts, the reference JSON, long sources): the writer then drops that page's
# min/max and with them the chunk's column index. Their offset index is still required.
LONG_VALUE_COLUMNS = frozenset({"image.bytes", "prompt", "reference", "observation.source"})
REQUIRED_SECTIONS = (
    "Dataset description", "Intended use", "Out-of-scope use", "Task and output grammar",
    "Configurations", "Fields", "Metric", "How the data was generated", "Validation",
    "Hub benchmark registration", "Limitations", "License", "Citation", "Changelog",
)
_REGION = re.compile(r"(<!-- exbind:begin (?P<name>[a-z_]+) -->\n)(?P<body>.*?)(<!-- exbind:end (?P=name) -->)",
                     re.DOTALL)
_FORMAT_ORDER = tuple(OUTPUT_KEYS)  # svg, canvas, tree, dom, graph, table


class CardCheckError(ValueError):
    """An export whose card, ``eval.yaml``, Parquet files or loading check failed.

    Attributes:
        problems: every problem found, one line each.
    """

    def __init__(self, problems: list[str], where: str = "export"):
        self.problems = list(problems)
        super().__init__(f"{where}: {len(self.problems)} card/export check problem(s):\n  - "
                         + "\n  - ".join(self.problems))


# --------------------------------------------------------------------------- generated regions


def regions(text: str) -> dict[str, str]:
    """``{region name: body}`` of every generated region of a card text."""
    return {m.group("name"): m.group("body") for m in _REGION.finditer(text)}


def fill_regions(text: str, bodies: dict[str, str]) -> str:
    """Replace the body of each named region (a name not in ``bodies`` is left as it is).

    Args:
        text: card text with ``<!-- exbind:begin NAME -->`` / ``<!-- exbind:end NAME -->``
            marker lines.
        bodies: ``{name: markdown}``; each body is written with a trailing newline.

    Raises:
        ValueError: when a name in ``bodies`` has no region in ``text``.
    """
    missing = sorted(set(bodies) - set(regions(text)))
    if missing:
        raise ValueError(f"card template has no generated region(s) {missing}")

    def sub(m: re.Match) -> str:
        name = m.group("name")
        if name not in bodies:
            return m.group(0)
        return m.group(1) + bodies[name].rstrip("\n") + "\n" + m.group(4)

    return _REGION.sub(sub, text)


def _by(counts: dict, keys: Iterable[str]) -> str:
    return ", ".join(f"{k} {counts[k]}" for k in keys if counts.get(k)) or "-"


def configs_region(counts: dict, configs: Iterable[str]) -> str:
    """Markdown table of rows per config (``counts``: the manifest's ``counts``).

    Columns: config (``broad`` marked default), rows, rows per format, rows per condition
    (``-`` for broad-suite configs, which have no condition).
    """
    configs = tuple(configs)
    lines = ["| config | rows | by format | by condition |", "|---|---:|---|---|"]
    for config in configs:
        c = counts[config]
        fmt: dict = {}
        cond: dict = {}
        for f, per in c["by_format_condition"].items():
            for k, n in per.items():
                fmt[f] = fmt.get(f, 0) + n
                if k != "none":
                    cond[k] = cond.get(k, 0) + n
        name = f"`{config}`" + (" (default)" if config == default_config(configs) else "")
        lines.append(f"| {name} | {c['rows']} | {_by(fmt, _FORMAT_ORDER)} | {_by(cond, sorted(cond))} |")
    return "\n".join(lines)


def _rate(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def gates_region(gate_tables: dict, suite_checks: dict) -> str:
    """Markdown gate table per suite (paper Table 6 form) plus the suite-level checks."""
    suites = list(gate_tables)
    g = gate_tables
    rows = [
        ("Unique gold target", lambda s: f"{g[s]['unique_gold']['passed']}/{g[s]['unique_gold']['n']}"),
        ("Structural oracle (exact)", lambda s: _rate(g[s]["structural_oracle"])),
        ("Visible oracle, prompt and image only (exact)", lambda s: _rate(g[s]["visible_oracle"])),
        ("Target-id leakage", lambda s: _rate(g[s]["target_id_leakage"])),
        ("Lexical-only baseline (exact)", lambda s: _rate(g[s]["lexical_only"])),
        ("Type-only baseline (exact)", lambda s: _rate(g[s]["type_only"])),
        ("Random-candidate expectation", lambda s: _rate(g[s]["random_expectation"])),
        ("Accepted latents / attempts", lambda s: f"{g[s]['accepted']}/{g[s]['attempted']}"),
        ("Rejected (by reason)", lambda s: ", ".join(f"{k} {v}" for k, v in g[s]["rejected"].items()) or "none"),
        ("Accepted records", lambda s: str(g[s]["accepted_records"])),
    ]
    lines = ["| gate | " + " | ".join(f"{s} ({g[s]['n']} records)" for s in suites) + " |",
             "|---|" + "---:|" * len(suites)]
    lines += [f"| {label} | " + " | ".join(fn(s) for s in suites) + " |" for label, fn in rows]
    lines.append("")
    disjoint = suite_checks.get("disjoint_broad_targeted")  # a subset build may lack a suite or a config
    if disjoint is not None:
        lines.append(f"- Broad/targeted disjointness by canonical latent hash: "
                     f"{'passed' if disjoint['passed'] else 'FAILED'} (overlap {disjoint['overlap']}).")
    balance = suite_checks.get("balance_targeted_table")
    if balance is not None:
        lines.append(f"- Target column and template balance within each targeted table condition: "
                     f"{'passed' if balance['passed'] else 'FAILED'}.")
    lines.append("- Visible oracle (answers from the prompt text and the PNG only) on every config as released: "
                 + ", ".join(f"`{name}` {v['exact']}/{v['n']}" for name, v in suite_checks["visible_oracle"].items())
                 + ".")
    for config, r in sorted((suite_checks.get("gold_rank_variation") or {}).items()):
        lines.append(f"- Gold-rank variation on `{config}`: {'passed' if r['passed'] else 'FAILED'} "
                     f"({r['distinct_ranks']} distinct gold ranks, largest rank share {r['max_rank_share']:.3f}, "
                     f"{r['high_candidate_ranks_13_plus']} high-candidate cases at rank 13 or beyond).")
    for s in suites:
        by_cond = {c: v for c, v in (g[s].get("random_expectation_by_condition") or {}).items() if c != "none"}
        if by_cond:
            lines.append(f"- Random-candidate expectation per condition ({s}): "
                         + ", ".join(f"{c} {_rate(v)}" for c, v in by_cond.items()) + ".")
    for config, r in sorted((suite_checks.get("table_shortcuts") or {}).items()):
        a = r["all"]
        lines.append(f"- Table shortcut programs on `{config}` ({r['n']} cases; expected exact): row by condition "
                     f"values minus the row-name and condition columns {_rate(a['row_residual'])} (a column guess in "
                     f"that row {_rate(a['row_non_condition'])}), first candidate {_rate(a['first_candidate'])}, "
                     f"last candidate {_rate(a['last_candidate'])}, top-left cell {_rate(a['top_left_cell'])}, "
                     f"random {_rate(a['random'])}.")
    return "\n".join(lines)


def generated_regions(counts: dict, gate_tables: dict, suite_checks: dict, configs: Iterable[str]) -> dict[str, str]:
    """The bodies the export writes into the card's ``configs`` and ``gates`` regions."""
    return {"configs": configs_region(counts, configs), "gates": gates_region(gate_tables, suite_checks)}


# --------------------------------------------------------------------------- checks: card


def _front_matter(text: str) -> tuple[Optional[dict], Optional[str]]:
    """``(metadata, None)`` or ``(None, problem)`` for a README text."""
    if not text.startswith("---\n"):
        return None, "README.md has no YAML front matter (it must start with a '---' line)"
    end = text.find("\n---\n", 4)
    if end < 0:
        return None, "README.md: the YAML front matter is not closed by a '---' line"
    try:
        meta = yaml.load(text[4:end], Loader=_YAML_LOADER)
    except yaml.YAMLError as exc:
        return None, f"README.md: the YAML front matter does not parse: {' '.join(str(exc).split())}"
    if not isinstance(meta, dict):
        return None, f"README.md: the YAML front matter is a {type(meta).__name__}, not a mapping"
    return meta, None


def _card_data(text: str) -> DatasetCardData:
    """The card's metadata as ``huggingface_hub`` holds it (what ``DatasetCard(text).data``
    gives), parsed with libyaml's safe loader when available (the release card's YAML is large)."""
    meta, problem = _front_matter(text)
    return DatasetCard(text).data if problem else DatasetCardData(**meta)


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def _section(text: str, title: str) -> Optional[str]:
    m = re.search(rf"^## {re.escape(title)}[ \t]*\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    return m.group(1) if m else None


def _vocabulary_problems(meta: dict) -> list[str]:
    out = []
    lic = meta.get("license")
    if lic is None:
        out.append("license: missing (the Hub needs a license id, e.g. cc-by-4.0)")
    for value in _as_list(lic) if lic is not None else []:
        if value not in HUB_LICENSE_IDS:
            out.append(f"license: {value!r} is not a Hub license id (see HUB_LICENSE_IDS; e.g. 'cc-by-4.0')")
    tasks = meta.get("task_categories")
    if not tasks:
        out.append("task_categories: missing (a list of Hub task ids, e.g. visual-question-answering)")
    for value in _as_list(tasks or []):
        if value not in HUB_TASK_CATEGORY_IDS:
            out.append(f"task_categories: {value!r} is not a Hub task id (see HUB_TASK_CATEGORY_IDS)")
    vocabularies = {
        "size_categories": SIZE_CATEGORIES,
        "language": LANGUAGE_CODES,
        "language_creators": _CREATORS["language"],
        "annotations_creators": _CREATORS["annotations"],
        "multilinguality": MULTILINGUALITIES,
    }
    for key, allowed in vocabularies.items():
        if key not in meta:
            if key in ("size_categories", "language"):
                out.append(f"{key}: missing")
            continue
        for value in _as_list(meta[key]):
            if value not in allowed:
                out.append(f"{key}: {value!r} is not in the datasets vocabulary for {key}")
    if not meta.get("pretty_name"):
        out.append("pretty_name: missing")
    return out


def card_problems(text: str, configs: Iterable[str], export_dir: Optional[Path] = None) -> list[str]:
    """Problems of a README text (the card); empty when it is valid.

    Args:
        text: the README.md text (front matter + markdown).
        configs: the config names the card must declare (the manifest's ``configs``).
        export_dir: when given, every ``data_files`` path must exist under it.

    Returns:
        One message per problem, each naming the YAML key, config or section.
    """
    configs = list(configs)
    meta, problem = _front_matter(text)
    if problem:
        return [problem]
    out = _vocabulary_problems(meta)

    for title in REQUIRED_SECTIONS:
        if _section(text, title) is None:
            out.append(f"section '## {title}' is missing")
    for name, body in regions(text).items():
        if not body.strip():
            out.append(f"generated region '{name}' is empty (the export fills it)")

    data = _card_data(text)
    try:
        parsed_configs = MetadataConfigs.from_dataset_card_data(data)
        infos = DatasetInfosDict.from_dataset_card_data(data)
    except Exception as exc:  # noqa: BLE001 - any failure of datasets' own parser is a card problem
        return out + [f"configs/dataset_info do not parse with datasets' metadata classes: {exc}"]
    again = DatasetCardData()
    parsed_configs.to_dataset_card_data(again)
    infos.to_dataset_card_data(again)
    again = again.to_dict()
    for key in ("configs", "dataset_info"):
        if again.get(key) != meta.get(key):
            out.append(f"{key}: does not round-trip unchanged through datasets' "
                       f"{'MetadataConfigs' if key == 'configs' else 'DatasetInfosDict'}")

    declared = list(parsed_configs)
    for name in configs:
        if name not in parsed_configs:
            out.append(f"configs: config {name!r} is missing")
    for name in declared:
        if name not in configs:
            out.append(f"configs: unexpected config {name!r} (expected {configs})")
    if "default" in declared:
        out.append("configs: a config is named 'default' (use `default: true` on broad instead)")
    defaults = [n for n, c in parsed_configs.items() if c.get("default")]
    want = default_config(configs)
    if defaults != [want]:
        out.append(f"configs: exactly one config must have `default: true` and it must be {want!r}; "
                   f"found {defaults}")
    for name, cfg in parsed_configs.items():
        files = [entry for entry in _as_list(cfg.get("data_files") or [])]
        if not files:
            out.append(f"configs: {name!r} has no data_files")
        for entry in files:
            paths = _as_list(entry.get("path")) if isinstance(entry, dict) else _as_list(entry)
            if isinstance(entry, dict) and entry.get("split") != "test":
                out.append(f"configs: {name!r} data_files split is {entry.get('split')!r}, expected 'test'")
            if export_dir is not None:
                for p in paths:
                    if not (Path(export_dir) / p).is_file():
                        out.append(f"configs: {name!r} names data file {p!r}, which is not in the export")
    for name in configs:
        info = infos.get(name)
        if info is None:
            out.append(f"dataset_info: config {name!r} has no entry")
        elif not info.features:
            out.append(f"dataset_info: config {name!r} declares no features")

    fields = _section(text, "Fields")
    if fields is not None:
        names = {f for info in infos.values() if info.features for f in info.features}
        undocumented = sorted(n for n in names if f"`{n}`" not in fields)
        if undocumented:
            out.append(f"section '## Fields' does not describe {undocumented}")
    return out


# --------------------------------------------------------------------------- checks: parquet


def parquet_layout(path: Path) -> dict:
    """What the viewer needs from one Parquet file.

    Returns:
        ``{"rows": int, "row_groups": [rows per group], "huggingface_metadata": bool,
        "offset_index_missing": [leaf paths], "column_index_missing": [leaf paths]}``
        (leaf paths as ``"image.bytes"``, list levels dropped; each listed once).
    """
    pf = pq.ParquetFile(path)
    md = pf.metadata
    no_offset, no_column = set(), set()
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        for j in range(rg.num_columns):
            chunk = rg.column(j)
            leaf = ".".join(p for p in chunk.path_in_schema.split(".") if p not in ("list", "element"))
            if not chunk.has_offset_index:
                no_offset.add(leaf)
            if not chunk.has_column_index:
                no_column.add(leaf)
    return {
        "rows": md.num_rows,
        "row_groups": [md.row_group(i).num_rows for i in range(md.num_row_groups)],
        "huggingface_metadata": b"huggingface" in (pf.schema_arrow.metadata or {}),
        "offset_index_missing": sorted(no_offset),
        "column_index_missing": sorted(no_column),
    }


def expected_row_groups(rows: int, size: int = VIEWER_ROW_GROUP_SIZE) -> list[int]:
    """Row-group sizes of ``rows`` rows written in groups of ``size`` (e.g. 250 -> [100, 100, 50])."""
    return [size] * (rows // size) + ([rows % size] if rows % size else [])


def parquet_problems(path: Path, features: Optional[datasets.Features] = None,
                     row_group_size: int = VIEWER_ROW_GROUP_SIZE) -> list[str]:
    """Viewer-readiness problems of one Parquet file (empty when it is ready).

    Args:
        path: the Parquet file.
        features: the features the card declares for its config; when given, the
            ``huggingface`` schema metadata must declare the same.
        row_group_size: rows per row group (the last one may hold fewer).
    """
    layout = parquet_layout(path)
    name = Path(path).as_posix()
    out = []
    want = expected_row_groups(layout["rows"], row_group_size)
    if layout["row_groups"] != want:
        out.append(f"{name}: row groups {layout['row_groups']}, expected {want} ({row_group_size} rows each)")
    if not layout["huggingface_metadata"]:
        out.append(f"{name}: no b'huggingface' schema metadata (features unknown to the viewer)")
    elif features is not None:
        meta = json.loads(pq.ParquetFile(path).schema_arrow.metadata[b"huggingface"])
        declared = datasets.Features.from_dict(meta["info"]["features"])
        if declared != features:
            out.append(f"{name}: the huggingface schema metadata declares other features than the card")
    if layout["offset_index_missing"]:
        out.append(f"{name}: no offset index (page index) for {layout['offset_index_missing']}")
    no_column = [c for c in layout["column_index_missing"] if c not in LONG_VALUE_COLUMNS]
    if no_column:
        out.append(f"{name}: no column index (page index) for {no_column}")
    return out


# --------------------------------------------------------------------------- checks: export


def check_export(export_dir: Path, configs: Iterable[str], load: bool = True) -> list[str]:
    """Every offline check of an export folder (see the module docstring).

    Args:
        export_dir: folder with ``README.md``, ``eval.yaml`` and ``data/<config>/*.parquet``.
        configs: the config names it must hold (export: ``composition.release.CONFIGS``;
            push: the manifest's ``configs``).
        load: also run :func:`load_problems` (``load_dataset`` per config); it runs only
            when every static check passed, so a broken card reports its own cause.

    Returns:
        Problems, one line each; empty when the export is valid.
    """

    export_dir = Path(export_dir)
    configs = list(configs)
    readme = export_dir / "README.md"
    if not readme.is_file():
        return [f"{readme}: missing"]
    text = readme.read_text(encoding="utf-8")
    out = card_problems(text, configs, export_dir)
    if _front_matter(text)[1] is not None:
        return out
    out += eval_yaml_problems(export_dir, configs)
    data = _card_data(text)
    try:
        parsed = MetadataConfigs.from_dataset_card_data(data)
        infos = DatasetInfosDict.from_dataset_card_data(data)
    except Exception:  # noqa: BLE001 - already reported by card_problems
        return out
    rows: dict = {}
    for config in configs:
        if config not in parsed:
            continue
        info = infos.get(config)
        for entry in _as_list(parsed[config].get("data_files") or []):
            for p in _as_list(entry.get("path") if isinstance(entry, dict) else entry):
                if (export_dir / p).is_file():
                    out += parquet_problems(export_dir / p, info.features if info else None)
                    rows[config] = rows.get(config, 0) + pq.ParquetFile(export_dir / p).metadata.num_rows
    if load and not out:
        out += load_problems(export_dir, configs, infos, rows)
    return out


def assert_export_valid(export_dir: Path, configs: Iterable[str], load: bool = True) -> None:
    """Raise :class:`CardCheckError` listing every problem of :func:`check_export`."""
    problems = check_export(export_dir, configs, load=load)
    if problems:
        raise CardCheckError(problems, where=str(export_dir))


__all__ = [
    "CardCheckError", "HUB_LICENSE_IDS", "HUB_TASK_CATEGORY_IDS", "LONG_VALUE_COLUMNS", "REQUIRED_SECTIONS",
    "VIEWER_ROW_GROUP_SIZE", "assert_export_valid", "card_problems", "check_export", "configs_region",
    "expected_row_groups", "fill_regions", "gates_region", "generated_regions", "load_problems",
    "parquet_layout", "parquet_problems", "regions",
]
