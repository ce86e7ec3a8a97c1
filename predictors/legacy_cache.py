"""The legacy bridge's cached predictor outputs (paper §6.5: legacy records are scored
"without rerunning inference", so each shipped record carries one real model output).

:func:`write_bridge_records` selects the legacy tasks (:func:`generator.legacy.tasks.select_tasks`),
runs the BM25 ranker once on each converted record (top-1 as ``{"target_id": ...}``) and
writes ``generator/legacy/data/bridge_records.jsonl`` with the run's provenance;
``python -m predictors.legacy_cache`` does it from the command line. It lives with the
predictors because it runs one; the case construction below it never imports a predictor.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import platform
from importlib import metadata
from pathlib import Path
from typing import Optional

from generator.legacy.converter import build_record
from generator.legacy.tasks import BRIDGE_FILE, PREDICTOR, SELECTION_FILE, select_tasks, to_input
from predictors import rankers
from predictors.rankers import rank_case


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def bm25_provenance(date: Optional[str] = None) -> dict:
    """Provenance of the BM25 run: predictor, parameters, package versions, source hashes, date."""
    root = Path(__file__).resolve().parents[1]
    versions = {}
    for pkg in ("bm25s", "numpy", "scipy"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return {
        "predictor": PREDICTOR,
        "implementation": "predictors.rankers.rank_case(case_id, instruction, reference, 'rank_bm25'); output = top-1",
        "parameters": {"k1": rankers.BM25_K1, "b": rankers.BM25_B, "method": "lucene",
                       "tokenizer": "exbind_scoring.tokenize",
                       "tie_break": "sha256('{case_id}|rank_bm25|{candidate_id}') ascending"},
        "reads": "the instruction and each candidate's candidate_text (the label the element draws: node, "
                 "edge or cluster label); never gold, the image or latent fields",
        "output_format": '{"target_id": "<top-1 candidate id>"}',
        "packages": {"python": platform.python_version(), **versions},
        "source_sha256": {p: _file_sha256(root / p) for p in ("predictors/rankers.py", "exbind_scoring.py")},
        "prompt_builder_hash": None,
        "prompt_note": "a ranker reads no prompt, so no prompt builder applies",
        "date": date or datetime.date.today().isoformat(),
    }


def run_bm25(record) -> str:
    """The BM25 ranker's raw output for one converted record: ``{"target_id": top-1}``."""
    ranking = rank_case(record.id, record.case.instruction, record.reference_json(), PREDICTOR)
    return json.dumps({"target_id": ranking[0]})


def write_bridge_records(path: Path = BRIDGE_FILE, date: Optional[str] = None) -> dict:
    """Select the tasks, run BM25 once on each, and write the legacy JSONL (one object a line,
    keys sorted). Returns the selection report plus ``{"path", "n"}``."""
    dicts, report = select_tasks()
    provenance = bm25_provenance(date)
    lines = []
    for obj in dicts:
        record = build_record(to_input(obj), render=False)
        obj = dict(obj, cached_output=run_bm25(record), output_provenance=provenance)
        lines.append(json.dumps(obj, sort_keys=True, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    if path == BRIDGE_FILE:
        SELECTION_FILE.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return {**report, "path": str(path), "n": len(lines)}


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m predictors.legacy_cache``: rewrite generator/legacy/data/bridge_records.jsonl (BM25 run included)."""
    parser = argparse.ArgumentParser(prog="python -m predictors.legacy_cache", description=main.__doc__)
    parser.add_argument("--out", type=Path, default=BRIDGE_FILE)
    args = parser.parse_args(argv)
    report = write_bridge_records(args.out)
    print(json.dumps(report, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
