"""The exact files the ExBind metric needs, so it can travel with the data (issue 12 item 5).

``evaluate`` copies a metric script into its module cache together with the sibling
modules the script itself imports with a relative import (``from .exbind_scoring import
...``); it does not follow the siblings' own imports. :func:`metric_files` reads the
script with ``evaluate``'s own import finder, checks that every sibling a copied module
imports is copied too, and names each file under the name it must have beside the others,
so publishing code can upload exactly these files (a Hub metric module, or a folder that
``evaluate.load("./exbind")`` reads offline)::

    for name, source in metric_files("exbind").items():
        shutil.copyfile(source, folder / name)     # folder/exbind.py, folder/exbind_scoring.py, ...
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional, Union


METRIC_SCRIPT = "exbind_metric.py"
ROOT = Path(__file__).resolve().parent
_RELATIVE_IMPORT = re.compile(r"^\s*from\s+\.(\w+)\s+import\b", re.MULTILINE)


def metric_files(name: str = "exbind_metric", root: Optional[Union[str, Path]] = None) -> dict[str, Path]:
    """``{file name in the published folder: source path}`` for the metric and its siblings.

    Args:
        name: the metric module's published name; the script is stored as ``<name>.py``
            (``evaluate.load(folder)`` and a Hub metric repository ``user/<name>`` read the
            script named after the folder or repository). The siblings keep their names.
        root: the folder holding ``exbind_metric.py`` and its siblings (default: this
            repository's root).

    Returns:
        An insertion-ordered dict: the script first, then each sibling in the order the
        script imports it (today ten files: the script, ``exbind_aggregate.py``,
        ``exbind_legacy_rules.py``, ``exbind_paired.py``, ``exbind_parse.py``, ``exbind_rankings.py``,
        ``exbind_reference.py``, ``exbind_scoring.py``, ``exbind_stages.py``,
        ``exbind_vocabulary.py``).

    Raises:
        ValueError: ``name`` is not a Python module name.
        FileNotFoundError: the script or a sibling it imports is missing.
        RuntimeError: a copied module imports a sibling the script does not import
            (``evaluate`` would not copy it, so loading would fail); the message names both.
    """
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise ValueError(f"name {name!r}: the metric's published name must be a Python module name (e.g. 'exbind')")
    root = Path(root) if root is not None else ROOT
    script = root / METRIC_SCRIPT
    if not script.is_file():
        raise FileNotFoundError(f"{script}: the metric script is missing")
    from evaluate.loading import get_imports  # here, not at import: `evaluate` pulls in transformers (seconds)

    siblings = [imp[1] for imp in get_imports(str(script)) if imp[0] == "internal"]
    files = {f"{name}.py": script}
    for module in siblings:
        path = root / f"{module}.py"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: {METRIC_SCRIPT} imports .{module}, but the file is missing")
        files[f"{module}.py"] = path
    for module in siblings:
        for needed in _RELATIVE_IMPORT.findall((root / f"{module}.py").read_text(encoding="utf-8")):
            if needed not in siblings:
                raise RuntimeError(f"{module}.py imports .{needed}, which {METRIC_SCRIPT} does not import: add "
                                   f"`from .{needed} import ...` to {METRIC_SCRIPT} so evaluate copies it")
    return files
