"""Shared fixtures. Every test run uses a temporary Hugging Face cache (datasets, evaluate
modules) and a temporary ExBind cache (``EXBIND_CACHE_DIR``: MiniLM embeddings and rendered
PNGs, so the suite never writes to ``~/.cache/exbind``), and never reaches the network."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

_HF_HOME = tempfile.mkdtemp(prefix="exbind-tests-hf-")
os.environ["HF_HOME"] = _HF_HOME
os.environ["HF_DATASETS_CACHE"] = os.path.join(_HF_HOME, "datasets")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["EXBIND_CACHE_DIR"] = tempfile.mkdtemp(prefix="exbind-tests-cache-")
os.environ.pop("EXBIND_EMBEDDING_CACHE", None)
os.environ.pop("EXBIND_RENDER_CACHE", None)

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def export_dir(tmp_path_factory) -> Path:
    """A full release export (all configs), built once per test session."""
    from exbind import release
    from publishing.export import export_release

    out = tmp_path_factory.mktemp("export") / "exbind"
    export_release(out, release, show_progress=False)
    return out


@pytest.fixture(scope="session")
def loaded(export_dir):
    """``{config: datasets.Dataset}`` loaded from the export with a fresh cache."""
    import datasets

    cache = tempfile.mkdtemp(prefix="exbind-load-")
    from composition.release import CONFIGS

    return {c: datasets.load_dataset(str(export_dir), c, split="test", cache_dir=cache) for c in CONFIGS}


@pytest.fixture(scope="session")
def rows(loaded):
    """``{config: [row dicts]}`` without decoded images (fast to iterate)."""
    return {c: list(ds.remove_columns(["image"])) for c, ds in loaded.items()}


@pytest.fixture(scope="module", autouse=True)
def _restore_import_state():
    """After every test module, undo what ``evaluate.load`` did to the interpreter: it
    appends its module cache to ``sys.path`` and imports ``evaluate_modules.*``, so later
    tests that load the metric from another cache would otherwise import this copy."""
    path, importers, modules = list(sys.path), dict(sys.path_importer_cache), set(sys.modules)
    yield
    sys.path[:] = path
    sys.path_importer_cache.clear()
    sys.path_importer_cache.update(importers)
    for name in [m for m in sys.modules if m not in modules and m.split(".")[0] == "evaluate_modules"]:
        del sys.modules[name]
