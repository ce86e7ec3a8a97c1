"""The Hub path (issue 5): the card and its offline check, viewer-ready Parquet, eval.yaml,
the .eval_results entry of a scored run, and the push (offline: HfApi is replaced).

Everything runs on the session export (conftest ``export_dir``); tests that mutate it work
on a copy in ``tmp_path``.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import huggingface_hub
import pyarrow.parquet as pq
import pytest
import yaml
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, parse_eval_result_entries

import publishing.export as export_module
import publishing.eval_files as eval_files
import publishing.hub as hub
from exbind import release
from publishing.card import (
    LONG_VALUE_COLUMNS,
    CardCheckError,
    card_problems,
    check_export,
    expected_row_groups,
    parquet_layout,
    parquet_problems,
    regions,
)
from publishing.export import MANIFEST_NAME, export_release, sha256_file
from composition.release import CONFIGS

REPO_ROOT = Path(__file__).resolve().parent.parent


def _data_files(export_dir: Path) -> dict[str, str]:
    meta = yaml.safe_load((export_dir / "README.md").read_text().split("---\n")[1])
    return {c["config_name"]: c["data_files"][0]["path"] for c in meta["configs"]}


def _copy(export_dir: Path, tmp_path: Path) -> Path:
    out = tmp_path / "exbind"
    shutil.copytree(export_dir, out)
    return out


def _rehash(out: Path, rel: str) -> None:
    """Record a deliberately edited file's new hash in the manifest (so only the checks object)."""
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    manifest["files"][rel] = sha256_file(out / rel)
    (out / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


# --------------------------------------------------------------------------- card


def test_card_check_passes_on_the_export(export_dir):
    assert check_export(export_dir, CONFIGS) == []


def test_card_template_tables_match_the_export(export_dir):
    """dataset_card.md keeps the generated tables the export writes (rows per config, gates)."""
    template = regions((REPO_ROOT / "publishing" / "dataset_card.md").read_text())
    exported = regions((export_dir / "README.md").read_text())
    assert sorted(exported) == ["configs", "gates"]
    assert template == exported, "dataset_card.md is stale: copy the generated regions from a fresh export's README.md"
    row = "| `targeted_table` | 120 | table 120 | compact 40, conjunctive 40, high_candidate 40 |"
    assert row in exported["configs"]
    assert "| Unique gold target | 250/250 | 240/240 |" in exported["gates"]
    assert "| Lexical-only baseline (exact) | 0.100 | 0.000 |" in exported["gates"]


def test_card_metadata_values(export_dir):
    meta = yaml.safe_load((export_dir / "README.md").read_text().split("---\n")[1])
    assert meta["license"] == "cc-by-4.0"
    assert meta["pretty_name"] == "ExBind"
    assert meta["task_categories"] == ["visual-question-answering", "image-text-to-text", "table-question-answering"]
    assert meta["size_categories"] == ["1K<n<10K"]
    assert meta["language"] == ["en"]
    assert [c["config_name"] for c in meta["configs"]] == sorted(CONFIGS)
    assert [c["config_name"] for c in meta["configs"] if c.get("default")] == ["broad"]
    assert {i["config_name"]: i["splits"][0]["num_examples"] for i in meta["dataset_info"]} == {
        "broad": 250, "paired": 100, "targeted_hierarchy": 120, "targeted_table": 120,
        "targeted_table_column_metadata": 120, "targeted_table_permuted": 360, "legacy_bridge": 300}


@pytest.mark.parametrize("old, new, expected", [
    ("license: cc-by-4.0", "license: cc-by-5.0",
     ["license: 'cc-by-5.0' is not a Hub license id (see HUB_LICENSE_IDS; e.g. 'cc-by-4.0')"]),
    ("- visual-question-answering\n", "- visual-qa\n",
     ["task_categories: 'visual-qa' is not a Hub task id (see HUB_TASK_CATEGORY_IDS)"]),
    ("size_categories:\n- 1K<n<10K", "size_categories:\n- 1K-10K",
     ["size_categories: '1K-10K' is not in the datasets vocabulary for size_categories"]),
    ("## Limitations\n", "## Caveats\n", ["section '## Limitations' is missing"]),
])
def test_card_check_names_each_broken_field(export_dir, old, new, expected):
    text = (export_dir / "README.md").read_text()
    assert text.count(old) == 1
    assert card_problems(text.replace(old, new), CONFIGS, export_dir) == expected


def test_card_check_reports_unparsable_yaml(export_dir):
    text = (export_dir / "README.md").read_text().replace("pretty_name: ExBind", "pretty_name: [ExBind", 1)
    (problem,) = card_problems(text, CONFIGS, export_dir)
    assert problem.startswith("README.md: the YAML front matter does not parse: while parsing a flow sequence")


def test_card_check_reports_a_missing_or_extra_config(export_dir):
    text = (export_dir / "README.md").read_text()
    paired = f"- config_name: paired\n  data_files:\n  - split: test\n    path: {_data_files(export_dir)['paired']}\n"
    assert text.count(paired) == 1
    assert card_problems(text.replace(paired, ""), CONFIGS, export_dir) == ["configs: config 'paired' is missing"]
    renamed = text.replace(paired, paired.replace("config_name: paired", "config_name: default"))
    assert card_problems(renamed, CONFIGS, export_dir) == [
        "configs: does not round-trip unchanged through datasets' MetadataConfigs",
        "configs: config 'paired' is missing",
        ("configs: unexpected config 'default' (expected ['broad', 'paired', 'targeted_table', "
         "'targeted_hierarchy', 'targeted_table_permuted', 'targeted_table_column_metadata', 'legacy_bridge'])"),
        "configs: a config is named 'default' (use `default: true` on broad instead)",
    ]


def test_card_check_reports_an_undocumented_field(export_dir):
    text = (export_dir / "README.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `gold_rank` |"))
    assert card_problems(text.replace(row + "\n", ""), CONFIGS, export_dir) == [
        "section '## Fields' does not describe ['gold_rank']"]


def test_check_export_loads_every_config_and_compares_with_the_card(export_dir, tmp_path):
    out = _copy(export_dir, tmp_path)
    readme = (out / "README.md").read_text()
    # The card claims 121 rows for targeted_table: only loading the data can notice.
    start = readme.index("- config_name: targeted_table\n", readme.index("dataset_info:"))
    head, tail = readme[:start], readme[start:]
    (out / "README.md").write_text(head + tail.replace("num_examples: 120", "num_examples: 121", 1))
    (problem,) = check_export(out, CONFIGS)
    assert problem.startswith("load_dataset(export, 'targeted_table') failed: NonMatchingSplitsSizesError: ")
    assert "num_examples=121" in problem and "num_examples=120" in problem


def test_a_failing_card_check_fails_the_export_and_keeps_the_previous_one(export_dir, tmp_path, monkeypatch):
    out = _copy(export_dir, tmp_path)
    before = {p.relative_to(out).as_posix(): sha256_file(p) for p in out.rglob("*") if p.is_file()}
    broken = tmp_path / "dataset_card.md"
    broken.write_text((REPO_ROOT / "publishing" / "dataset_card.md").read_text().replace("license: cc-by-4.0", "license: cc-by-5.0"))
    monkeypatch.setattr(export_module, "CARD_TEMPLATE", broken)
    with pytest.raises(CardCheckError, match=r"license: 'cc-by-5.0' is not a Hub license id") as err:
        export_release(out, release, show_progress=False)
    assert err.value.problems == [
        "license: 'cc-by-5.0' is not a Hub license id (see HUB_LICENSE_IDS; e.g. 'cc-by-4.0')"]
    assert {p.relative_to(out).as_posix(): sha256_file(p) for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".exbind.lock", "dataset_card.md", "exbind"]  # lock file stays


# --------------------------------------------------------------------------- parquet


def test_parquet_files_are_viewer_ready(export_dir):
    files = _data_files(export_dir)
    layout = {c: parquet_layout(export_dir / p) for c, p in files.items()}
    assert {c: v["row_groups"] for c, v in layout.items()} == {
        "broad": [100, 100, 50],
        "paired": [100],
        "targeted_table": [100, 20],
        "targeted_hierarchy": [100, 20],
        "targeted_table_permuted": [100, 100, 100, 60],
        "targeted_table_column_metadata": [100, 20],
        "legacy_bridge": [100, 100, 100],
    }
    assert all(v["huggingface_metadata"] for v in layout.values())
    assert all(v["offset_index_missing"] == [] for v in layout.values())
    # Column index everywhere except where values exceed the writer's 4 KiB statistics limit.
    assert {c: v["column_index_missing"] for c, v in layout.items()} == {
        "broad": ["image.bytes", "prompt", "reference"],
        "paired": ["image.bytes", "reference"],
        "targeted_table": ["prompt", "reference"],
        "targeted_hierarchy": ["prompt", "reference"],
        "targeted_table_permuted": ["prompt", "reference"],
        "targeted_table_column_metadata": ["prompt", "reference"],
        "legacy_bridge": ["image.bytes", "observation.source", "prompt", "reference"],
    }
    assert set().union(*(v["column_index_missing"] for v in layout.values())) <= LONG_VALUE_COLUMNS
    assert expected_row_groups(250) == [100, 100, 50] and expected_row_groups(100) == [100]


def test_parquet_check_rejects_big_row_groups_without_page_index_or_hf_metadata(export_dir, tmp_path):
    src = export_dir / _data_files(export_dir)["targeted_table"]
    table = pq.read_table(src)
    bad = tmp_path / "bad.parquet"
    pq.write_table(table.replace_schema_metadata(None), bad, row_group_size=1000)
    layout = parquet_layout(bad)
    assert len(layout["offset_index_missing"]) == len(layout["column_index_missing"]) == 43  # every leaf column
    short = [c for c in layout["column_index_missing"] if c not in LONG_VALUE_COLUMNS]
    assert len(short) == 39
    assert parquet_problems(bad) == [
        f"{bad.as_posix()}: row groups [120], expected [100, 20] (100 rows each)",
        f"{bad.as_posix()}: no b'huggingface' schema metadata (features unknown to the viewer)",
        f"{bad.as_posix()}: no offset index (page index) for {layout['offset_index_missing']}",
        f"{bad.as_posix()}: no column index (page index) for {short}",
    ]


# --------------------------------------------------------------------------- eval.yaml


EVAL_DESCRIPTION = (
    "ExBind is a controlled diagnostic benchmark for executable correspondence: given a rendered SVG or "
    "canvas picture, or a serialized tree, HTML DOM, graph or HTML table, an instruction and a candidate "
    'inventory, a model returns one strict JSON reference (e.g. {"cell_id": "cell_r01_c01"}). Each task is '
    "one config (split test). Headline metric: exact accuracy, the fraction of cases whose returned "
    "reference equals gold exactly (in [0, 1]; an unparsable or out-of-inventory answer counts as wrong), "
    "scored by the ExBind evaluator (exbind_metric.py or python exbind.py score), which also reports "
    "validity, per-constraint scores and the first violated structural constraint."
)


def test_eval_yaml_registers_one_task_per_config(export_dir):
    text = (export_dir / "eval.yaml").read_text()
    assert yaml.safe_load(text) == {
        "name": "ExBind",
        "description": EVAL_DESCRIPTION,
        "evaluation_framework": "exbind",
        "tasks": [
            {"id": "broad", "config": "broad", "split": "test"},
            {"id": "paired", "config": "paired", "split": "test"},
            {"id": "targeted_table", "config": "targeted_table", "split": "test"},
            {"id": "targeted_hierarchy", "config": "targeted_hierarchy", "split": "test"},
            {"id": "targeted_table_permuted", "config": "targeted_table_permuted", "split": "test"},
            {"id": "targeted_table_column_metadata", "config": "targeted_table_column_metadata", "split": "test"},
        ],
    }
    assert text.startswith("name: ExBind\ndescription: 'ExBind is a controlled")
    assert text.endswith(
        "- id: targeted_table_column_metadata\n  config: targeted_table_column_metadata\n  split: test\n")
    assert eval_files.eval_tasks(["broad", "legacy_bridge"]) == [{"id": "broad", "config": "broad", "split": "test"}]


def test_eval_yaml_check_names_the_problem(export_dir, tmp_path):
    out = _copy(export_dir, tmp_path)
    data = yaml.safe_load((out / "eval.yaml").read_text())
    data["tasks"][1]["config"] = "pairs"
    del data["evaluation_framework"]
    (out / "eval.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    assert eval_files.eval_yaml_problems(out, CONFIGS) == [
        "eval.yaml: `evaluation_framework` missing or empty",
        ("eval.yaml: task 'paired' names config 'pairs', not in ['broad', 'paired', 'targeted_table', "
         "'targeted_hierarchy', 'targeted_table_permuted', 'targeted_table_column_metadata', 'legacy_bridge']"),
        "eval.yaml: config 'paired' has no task",
    ]
    (out / "eval.yaml").unlink()
    assert eval_files.eval_yaml_problems(out, CONFIGS) == ["eval.yaml: missing at the export root"]


# --------------------------------------------------------------------------- .eval_results


def _score_args(*argv: str) -> argparse.Namespace:
    from reports.score_cli import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_score_cli_writes_the_eval_results_entry(export_dir, tmp_path, capsys):
    from reports.score_cli import run
    from reports.score_report import load_config

    cache = str(tmp_path / "cache")
    case_ids, references = load_config(export_dir, "targeted_table", cache)
    preds = tmp_path / "preds.jsonl"
    with open(preds, "w") as fh:  # gold for the first 63 cases, no prediction for the other 57
        for case_id, ref in list(zip(case_ids, references))[:63]:
            fh.write(json.dumps({"case_id": case_id, "output": json.dumps(json.loads(ref)["gold"])}) + "\n")
    model_repo = tmp_path / "my-model"
    args = _score_args("--config", "targeted_table", "--predictions", str(preds), "--export", str(export_dir),
                       "--cache-dir", cache, "--eval-results", str(model_repo), "--eval-dataset-id", "user/exbind")
    assert run(args) == 0
    path = model_repo / ".eval_results" / "exbind_targeted_table.yaml"
    assert f"eval results: wrote {path}" in capsys.readouterr().out
    assert path.read_text() == (
        "- dataset:\n"
        "    id: user/exbind\n"
        "    task_id: targeted_table\n"
        "  value: 0.525\n"
        "  notes: exact 63/120, Wilson 95% [0.436, 0.612]; valid 63/120; 57 missing predictions; generator "
        "exbind.generator.v2\n"
    )
    (entry,) = parse_eval_result_entries(yaml.safe_load(path.read_text()))
    assert (entry.dataset_id, entry.task_id, entry.value, entry.dataset_revision) == (
        "user/exbind", "targeted_table", 0.525, None)
    folder = model_repo / ".eval_results"
    assert eval_files.eval_results_path(folder, "broad") == folder / "exbind_broad.yaml"


def test_score_cli_eval_results_needs_a_dataset_id(export_dir, tmp_path, capsys):
    from reports.score_cli import run

    preds = tmp_path / "preds.jsonl"
    preds.write_text("")
    args = _score_args("--config", "targeted_table", "--predictions", str(preds), "--export", str(export_dir),
                       "--eval-results", str(tmp_path / "m"))
    assert run(args) == 2
    assert capsys.readouterr().err == (
        "error: --eval-results needs --eval-dataset-id (the Hub id of the ExBind dataset, e.g. user/exbind)\n")
    args = _score_args("--config", "targeted_table", "--predictions", str(preds), "--export", str(export_dir),
                       "--eval-results", str(tmp_path / "m"), "--eval-dataset-id", "exbind")
    assert run(args) == 2
    assert capsys.readouterr().err == "error: --eval-dataset-id 'exbind': expected '<user or org>/<dataset>'\n"
    assert not (tmp_path / "m").exists()


# --------------------------------------------------------------------------- push


class FakeApi:
    """Records what push_export asks of the Hub; never touches the network."""

    instances: list = []

    def __init__(self, token=None):
        self.token = token
        self.calls: list[tuple] = []
        FakeApi.instances.append(self)

    def create_repo(self, repo_id, **kw):
        self.calls.append(("create_repo", repo_id, kw))

    def create_branch(self, repo_id, **kw):
        self.calls.append(("create_branch", repo_id, kw))

    def list_repo_files(self, repo_id, **kw):
        self.calls.append(("list_repo_files", repo_id, kw))
        return [".gitattributes", "README.md", "data/broad/test-00000-of-00001-0000000000000000.parquet"]

    def create_commit(self, repo_id, operations, **kw):
        self.calls.append(("create_commit", repo_id, list(operations), kw))
        return type("CommitInfo", (), {"commit_url": f"https://huggingface.co/datasets/{repo_id}/commit/abc"})()


@pytest.fixture
def fake_hub(monkeypatch):
    FakeApi.instances = []
    monkeypatch.setattr(hub, "HfApi", FakeApi)
    monkeypatch.setattr(hub, "get_token", lambda: "hf_test_token")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    return FakeApi


def _push_args(export: Path, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    hub.add_push_arguments(parser.add_subparsers(dest="command"))
    return parser.parse_args(["push", *argv, "--export", str(export)])


METRIC_PATHS = ["metric/exbind.py", "metric/exbind_aggregate.py", "metric/exbind_legacy_rules.py",
                "metric/exbind_paired.py", "metric/exbind_parse.py", "metric/exbind_rankings.py",
                "metric/exbind_reference.py", "metric/exbind_scoring.py", "metric/exbind_stages.py",
                "metric/exbind_vocabulary.py"]


def _expected_paths(export_dir: Path) -> list[str]:
    return (["README.md"] + sorted(_data_files(export_dir).values()) + ["eval.yaml", "exbind_manifest.json"]
            + METRIC_PATHS)


def test_push_dry_run_prints_the_exact_operations(export_dir, fake_hub, capsys):
    assert hub.run_push(_push_args(export_dir, "user/exbind", "--dry-run")) == 0
    out = capsys.readouterr().out.splitlines()
    paths = _expected_paths(export_dir)
    assert len(paths) == 20
    assert paths[1].startswith("data/broad/") and paths[2].startswith("data/legacy_bridge/")
    assert paths[7].startswith("data/targeted_table_permuted/")
    assert out[:4] == [
        f"push 20 files from {export_dir} to dataset repo user/exbind (branch main) in one commit",
        "  create_repo(repo_id='user/exbind', repo_type='dataset', private=False, exist_ok=True)",
        ("  create_commit(repo_id='user/exbind', repo_type='dataset', revision=None, "
         "commit_message='ExBind exbind.generator.v2: 7 configs, 10 files, metric (10 files)'):"),
        "    delete <each file under data/ on the branch that this export does not hold; listed when pushing>",
    ]
    assert [line.split()[1] for line in out[4:24]] == paths
    assert out[4] == (f"    add README.md ({(export_dir / 'README.md').stat().st_size} bytes, "
                      f"sha256 {sha256_file(export_dir / 'README.md')[:16]})")
    assert out[24].startswith("note: eval.yaml names evaluation_framework 'exbind'")
    assert out[25:] == ["dry run: nothing was uploaded"]
    assert FakeApi.instances == []  # no Hub client was even created


def test_push_uploads_everything_in_one_commit(export_dir, fake_hub):
    plan = hub.plan_push(export_dir, "user/exbind", private=True, revision="v1-candidate", load_check=False)
    info = hub.push_export(plan)
    assert info.commit_url == "https://huggingface.co/datasets/user/exbind/commit/abc"
    (api,) = FakeApi.instances
    assert api.token == "hf_test_token"
    assert [c[0] for c in api.calls] == ["create_repo", "create_branch", "list_repo_files", "create_commit"]
    assert api.calls[0] == ("create_repo", "user/exbind", {"repo_type": "dataset", "private": True, "exist_ok": True})
    assert api.calls[1] == ("create_branch", "user/exbind",
                            {"branch": "v1-candidate", "repo_type": "dataset", "exist_ok": True})
    assert api.calls[2] == ("list_repo_files", "user/exbind", {"repo_type": "dataset", "revision": "v1-candidate"})
    _, repo_id, operations, kw = api.calls[3]
    assert repo_id == "user/exbind"
    assert kw == {"repo_type": "dataset",
                  "commit_message": "ExBind exbind.generator.v2: 7 configs, 10 files, metric (10 files)",
                  "commit_description": "Exported by `python exbind.py build`; every file's SHA-256 is in "
                                        "exbind_manifest.json.",
                  "revision": "v1-candidate"}
    assert isinstance(operations[0], CommitOperationDelete)
    assert operations[0].path_in_repo == "data/broad/test-00000-of-00001-0000000000000000.parquet"
    assert all(isinstance(op, CommitOperationAdd) for op in operations[1:])
    assert [op.path_in_repo for op in operations[1:]] == _expected_paths(export_dir)
    assert all(op.upload_info.sha256.hex() == sha256_file(Path(op.path_or_fileobj)) for op in operations[1:])
    assert all(Path(op.path_or_fileobj) == export_dir / op.path_in_repo for op in operations[1:11])


def test_the_pushed_metric_scores_from_a_snapshot_without_the_repository(export_dir, tmp_path):
    """Lay out exactly the files push would upload, as a Hub snapshot would hold them, and
    score from there: the dataset loads and the metric loads from ``metric/exbind.py``."""
    import datasets
    import evaluate

    plan = hub.plan_push(export_dir, "user/exbind", load_check=False)
    snapshot = tmp_path / "snapshot"
    for op in plan.operations:
        dest = snapshot / op.path_in_repo
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(op.path_or_fileobj, dest)
    ds = datasets.load_dataset(str(snapshot), "targeted_table", split="test", cache_dir=str(tmp_path / "cache"))
    metric = evaluate.load(str(snapshot / "metric" / "exbind.py"))
    outputs = [row["gold"] for row in ds.select(range(10))] + [""] * 110
    result = metric.compute(predictions=outputs, references=ds["reference"])
    assert (result["n"], result["n_exact"], result["n_valid"]) == (120, 10, 10)


def test_push_refuses_a_tampered_export(export_dir, tmp_path, fake_hub, capsys):
    out = _copy(export_dir, tmp_path)
    parquet = _data_files(out)["paired"]
    with open(out / parquet, "ab") as fh:
        fh.write(b"\0")
    assert hub.run_push(_push_args(out, "user/exbind")) == 2
    assert capsys.readouterr().err == (
        f"error: refusing to push {out}: 1 file(s) differ from exbind_manifest.json (changed, missing or extra): "
        f"{parquet}; rebuild the export\n")
    assert FakeApi.instances == []


def test_push_refuses_an_export_whose_checks_fail(export_dir, tmp_path, fake_hub):
    out = _copy(export_dir, tmp_path)
    (out / "README.md").write_text((out / "README.md").read_text().replace("license: cc-by-4.0", "license: cc-by"))
    _rehash(out, "README.md")
    with pytest.raises(hub.PushError) as err:
        hub.plan_push(out, "user/exbind")
    assert str(err.value) == (f"refusing to push {out}: the export checks fail:\n"
                              "  - license: 'cc-by' is not a Hub license id (see HUB_LICENSE_IDS; e.g. 'cc-by-4.0')")


def test_push_without_a_token_is_a_clear_error(export_dir, fake_hub, monkeypatch):
    monkeypatch.setattr(hub, "get_token", lambda: None)
    plan = hub.plan_push(export_dir, "user/exbind", load_check=False)
    with pytest.raises(hub.PushError) as err:
        hub.push_export(plan)
    assert str(err.value) == (
        "no Hugging Face token: log in with `hf auth login` (or set HF_TOKEN) with write access to "
        "user/exbind; `--dry-run` shows the operations without one")
    assert FakeApi.instances == []


def test_push_refuses_offline_mode_and_bad_repo_ids(export_dir, fake_hub, monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    plan = hub.plan_push(export_dir, "user/exbind", load_check=False)
    with pytest.raises(hub.PushError, match="HF_HUB_OFFLINE is set"):
        hub.push_export(plan)
    with pytest.raises(hub.PushError, match="expected '<user or org>/<dataset name>'"):
        hub.plan_push(export_dir, "exbind")
    with pytest.raises(hub.PushError, match="repo id 'user/ex bind'"):
        hub.plan_push(export_dir, "user/ex bind")
    assert FakeApi.instances == []
