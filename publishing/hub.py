"""Pushing a release to the Hugging Face Hub in one commit.

**Push** (:func:`plan_push`, :func:`push_export`, ``python exbind.py push``): the whole
export in one commit (``HfApi.create_repo(repo_type="dataset", exist_ok=True)`` then one
``HfApi.create_commit`` with a :class:`~huggingface_hub.CommitOperationAdd` per file,
sorted by path, plus a :class:`~huggingface_hub.CommitOperationDelete` for every file under
``data/`` on the branch that the export no longer holds, so content-addressed Parquet
files of an older release do not pile up). It refuses an export whose files do not match
its manifest (:func:`publishing.export.verify_manifest`) or whose offline checks fail
(:func:`publishing.card.check_export`). The token is the usual ``huggingface_hub`` login
(:func:`huggingface_hub.get_token`: ``hf auth login`` or ``HF_TOKEN``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import huggingface_hub
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, get_token
from huggingface_hub.utils import HFValidationError, validate_repo_id

from exbind_metric_files import metric_files
from publishing.card import check_export
from publishing.eval_files import EVALUATION_FRAMEWORK, HUB_EVALUATION_FRAMEWORKS
from publishing.export import MANIFEST_NAME, verify_manifest

REPO_TYPE = "dataset"
# The metric travels with the data: ``metric/exbind.py`` and the evaluator modules it imports
# (:func:`exbind_metric_files.metric_files`), loadable from a snapshot with
# ``evaluate.load(f"{snapshot}/metric/exbind.py")`` without this repository. Not at the
# repository root: ``datasets`` refuses a dataset folder holding ``<name>.py`` there.
METRIC_FOLDER = "metric"
METRIC_NAME = "exbind"


class PushError(RuntimeError):
    """A push that must not happen (tampered export, failing checks, no token, offline)."""


@dataclass
class PushPlan:
    """Everything one push does, computed offline.

    Attributes:
        export_dir: the export folder.
        repo_id: target dataset repo.
        private: visibility when the repo is created (an existing repo keeps its own).
        revision: target branch (None: the default branch, ``main``).
        commit_message, commit_description: of the one commit.
        operations: a :class:`~huggingface_hub.CommitOperationAdd` per export file, sorted
            by path (deletions of stale remote files are added at push time).
        notes: remarks printed with the plan (e.g. the evaluation_framework caveat).
    """

    export_dir: Path
    repo_id: str
    private: bool
    revision: Optional[str]
    commit_message: str
    commit_description: str
    operations: list
    notes: list = field(default_factory=list)
    repo_type: str = REPO_TYPE

    def describe(self) -> str:
        """The plan as printed by ``push`` (``--dry-run`` prints only this)."""
        lines = [
            (f"push {len(self.operations)} files from {self.export_dir} to dataset repo {self.repo_id} "
             f"(branch {self.revision or 'main'}) in one commit"),
            (f"  create_repo(repo_id={self.repo_id!r}, repo_type={self.repo_type!r}, private={self.private}, "
             "exist_ok=True)"),
        ]
        if self.revision:
            lines.append(f"  create_branch(repo_id={self.repo_id!r}, branch={self.revision!r}, "
                         f"repo_type={self.repo_type!r}, exist_ok=True)")
        lines.append(f"  create_commit(repo_id={self.repo_id!r}, repo_type={self.repo_type!r}, "
                     f"revision={self.revision!r}, commit_message={self.commit_message!r}):")
        lines.append("    delete <each file under data/ on the branch that this export does not hold; "
                     "listed when pushing>")
        for op in self.operations:
            size = Path(op.path_or_fileobj).stat().st_size
            lines.append(f"    add {op.path_in_repo} ({size} bytes, sha256 {op.upload_info.sha256.hex()[:16]})")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _export_configs(export_dir: Path) -> tuple[dict, list[str]]:

    path = export_dir / MANIFEST_NAME
    if not path.is_file():
        raise PushError(f"{export_dir}: not an ExBind export (no {MANIFEST_NAME}); "
                        f"build it with `python exbind.py build --out {export_dir}`")
    manifest = json.loads(path.read_text(encoding="utf-8"))
    return manifest, list(manifest["configs"])


def plan_push(export_dir: Path, repo_id: str, private: bool = False, revision: Optional[str] = None,
              load_check: bool = True) -> PushPlan:
    """Verify an export and plan its push (no network).

    Args:
        export_dir: folder written by ``python exbind.py build``.
        repo_id: ``"<user or org>/<name>"``.
        private: create the repo private (only when it does not exist yet).
        revision: branch to push to (created from ``main`` when missing); None = ``main``.
        load_check: run the ``load_dataset`` part of :func:`publishing.card.check_export`.

    Returns:
        The :class:`PushPlan`: every export file at its path, then the metric files under
        :data:`METRIC_FOLDER` (so the dataset repository can be scored without this repository).

    Raises:
        PushError: a malformed ``repo_id``; no manifest; files that do not match the
            manifest (listed); or failing export checks (listed).
    """

    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        raise PushError(f"repo id {repo_id!r}: {exc}") from None
    if "/" not in repo_id:
        raise PushError(f"repo id {repo_id!r}: expected '<user or org>/<dataset name>'")
    export_dir = Path(export_dir)
    manifest, configs = _export_configs(export_dir)
    bad = verify_manifest(export_dir)
    if bad:
        raise PushError(f"refusing to push {export_dir}: {len(bad)} file(s) differ from exbind_manifest.json "
                        f"(changed, missing or extra): {', '.join(bad)}; rebuild the export")
    problems = check_export(export_dir, configs, load=load_check)
    if problems:
        raise PushError(f"refusing to push {export_dir}: the export checks fail:\n  - " + "\n  - ".join(problems))
    files = sorted(p.relative_to(export_dir).as_posix() for p in export_dir.rglob("*") if p.is_file())
    operations = [CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(export_dir / rel)) for rel in files]
    operations += [CommitOperationAdd(path_in_repo=f"{METRIC_FOLDER}/{name}", path_or_fileobj=str(source))
                   for name, source in sorted(metric_files(METRIC_NAME).items())]
    notes = []
    if EVALUATION_FRAMEWORK not in HUB_EVALUATION_FRAMEWORKS:
        notes.append(f"eval.yaml names evaluation_framework {EVALUATION_FRAMEWORK!r}, which the Hub's list "
                     "(huggingface.js packages/tasks/src/eval.ts) does not hold yet: the Hub flags eval.yaml "
                     "until it is added there and the dataset is allow-listed as a benchmark")
    return PushPlan(
        export_dir=export_dir, repo_id=repo_id, private=private, revision=revision,
        commit_message=(f"ExBind {manifest['generator_version']}: {len(configs)} configs, {len(files)} files, "
                        f"metric ({len(operations) - len(files)} files)"),
        commit_description="Exported by `python exbind.py build`; every file's SHA-256 is in exbind_manifest.json.",
        operations=operations, notes=notes,
    )


def _hub_offline() -> bool:
    return bool(huggingface_hub.constants.HF_HUB_OFFLINE)


def push_export(plan: PushPlan, token: Optional[str] = None, api: Optional[HfApi] = None):
    """Carry out a plan: create the repo (and branch), then one commit.

    Args:
        plan: from :func:`plan_push`.
        token: Hub token (default: :func:`huggingface_hub.get_token`).
        api: an :class:`~huggingface_hub.HfApi` (default: ``HfApi(token=token)``).

    Returns:
        The :class:`~huggingface_hub.CommitInfo` of the commit.

    Raises:
        PushError: ``HF_HUB_OFFLINE`` is set, or no token is available.
    """
    if _hub_offline():
        raise PushError("HF_HUB_OFFLINE is set: unset it to push (a dry run needs no network)")
    token = token or get_token()
    if not token:
        raise PushError("no Hugging Face token: log in with `hf auth login` (or set HF_TOKEN) with write access "
                        f"to {plan.repo_id}; `--dry-run` shows the operations without one")
    api = api or HfApi(token=token)
    api.create_repo(plan.repo_id, repo_type=plan.repo_type, private=plan.private, exist_ok=True)
    if plan.revision:
        api.create_branch(plan.repo_id, branch=plan.revision, repo_type=plan.repo_type, exist_ok=True)
    local = {op.path_in_repo for op in plan.operations}
    remote = api.list_repo_files(plan.repo_id, repo_type=plan.repo_type, revision=plan.revision)
    deletions = [CommitOperationDelete(path_in_repo=p) for p in sorted(remote)
                 if p.startswith("data/") and p not in local]
    return api.create_commit(plan.repo_id, repo_type=plan.repo_type, operations=deletions + plan.operations,
                             commit_message=plan.commit_message, commit_description=plan.commit_description,
                             revision=plan.revision)


# --------------------------------------------------------------------------- command line

PUSH_EPILOG = (
    "examples:\n"
    "  python exbind.py push user/exbind --dry-run\n"
    "  python exbind.py push user/exbind --private\n"
    "  python exbind.py push user/exbind --revision v1-candidate --export /tmp/exbind\n"
    "The export is verified first (manifest hashes, card, eval.yaml, Parquet layout, load_dataset per config);\n"
    "a failing check or a file that differs from exbind_manifest.json stops the push (exit status 2).\n"
    "Token: `hf auth login` or HF_TOKEN.\n"
)


def add_push_arguments(subparsers) -> argparse.ArgumentParser:
    """Add the ``push`` subcommand to an ``argparse`` subparsers object; returns its parser."""
    push = subparsers.add_parser("push", help="upload the export to a Hub dataset repo in one commit",
                                 description="Upload the whole export (README, eval.yaml, manifest, every config) "
                                             "to a Hugging Face dataset repo in one commit.",
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=PUSH_EPILOG)
    push.add_argument("repo_id", help="dataset repo, '<user or org>/<name>' (created when missing)")
    push.add_argument("--private", action="store_true", help="create the repo private (an existing repo keeps "
                                                              "its visibility)")
    push.add_argument("--revision", metavar="BRANCH", help="branch to commit to (created when missing; default main)")
    push.add_argument("--dry-run", action="store_true", help="verify and print the exact operations; upload nothing")
    push.add_argument("--export", type=Path, default=Path("exbind"), help="export folder (default ./exbind)")
    return push


def run_push(args: argparse.Namespace) -> int:
    """Run ``exbind.py push``: verify, print the plan, then (unless ``--dry-run``) push.

    Returns:
        0 on success (or after a dry run); 2 when the push is refused (reason on stderr).
    """
    try:
        plan = plan_push(args.export, args.repo_id, private=args.private, revision=args.revision)
        print(plan.describe())
        if args.dry_run:
            print("dry run: nothing was uploaded")
            return 0
        info = push_export(plan)
    except PushError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"pushed: {getattr(info, 'commit_url', info)}")
    return 0


__all__ = ["PushError", "PushPlan", "add_push_arguments", "plan_push", "push_export", "run_push"]
