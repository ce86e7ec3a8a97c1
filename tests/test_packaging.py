"""``pip install .`` gives the modules, their data and an ``exbind`` command that runs
outside the repository (issue 12 item 4)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

from conftest import REPO_ROOT

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


def test_every_top_level_evaluator_module_is_packaged():
    listed = set(PYPROJECT["tool"]["setuptools"]["py-modules"])
    on_disk = {p.stem for p in REPO_ROOT.glob("*.py")}
    assert listed == on_disk


def test_wheel_install_runs_the_exbind_command_outside_the_repository(tmp_path):
    target = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-compile", "--target", str(target), str(REPO_ROOT)],
        capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    for data in ("generator/data/relational.json", "generator/data/table.json",
                 "generator/legacy/data/bridge_records.jsonl", "generator/legacy/data/gallery/LICENSE",
                 "publishing/dataset_card.md", "exbind_metric.py"):
        assert (target / data).is_file(), data
    env = {**os.environ, "PYTHONPATH": str(target)}
    script = target / "bin" / "exbind"
    assert script.is_file()
    shown = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True,
                           cwd=tmp_path, env=env, timeout=300)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "{build,score,predict,run-model,push,show}" in shown.stdout
    where = subprocess.run([sys.executable, "-c", "import exbind, generator; print(exbind.__file__, generator.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert where.stdout.split() == [str(target / "exbind.py"), str(target / "generator" / "__init__.py")]
