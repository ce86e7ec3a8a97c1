"""Safe replacement of an export folder: target check, exclusive lock, atomic exchange,
cleanup of leftovers from dead builds (docs/specification.md §10; issue 11 items 3, 4 and 10).

Guarantees, each with a regression test in ``tests/test_swap.py``:

- **No user file is ever deleted.** :func:`check_export_target` accepts a new path, an
  empty folder, or a previous export: a folder whose ``exbind_manifest.json`` parses and
  whose files are all listed in it (files the manifest lists may be missing). Anything else
  (an empty or malformed manifest, an extra ``NOTES.md``, a symlink, a FIFO) is refused
  with :class:`ExportPathError` naming the unexpected files.
- **One build per output at a time.** :func:`export_lock` takes an exclusive
  ``fcntl.flock`` on ``.<name>.lock`` beside the output, without waiting: a second build
  fails at once with :class:`ExportBusyError` ("another build holds the lock"), before any
  generation. The lock file stays (removing it would race with a waiting opener); it holds
  the PID of the last holder, for the message.
- **Either the old or the new export is at ``--out`` at every instant.** :func:`install`
  exchanges the staged folder with the output in one system call (Linux
  ``renameat2(RENAME_EXCHANGE)``, macOS ``renamex_np(RENAME_SWAP)``, both through
  ``ctypes``), then removes the old tree, which now sits at the staging name. Where neither
  call exists (other systems, or a file system that refuses the flag) it falls back to two
  ``rename`` calls under the lock; a kill between them leaves the old export at
  ``.<name>.old-<pid>-<token>``, and the next build restores it before anything else.
- **Leftovers are cleaned.** Staging (``.<name>.tmp-<pid>-<token>``), old
  (``.<name>.old-<pid>-<token>``) and cache (``exbind-cache-<pid>-*`` in the system temporary
  folder) names carry the owning PID; :func:`clean_stale` removes those whose PID is no
  longer running (a live PID, even a reused one, is left alone). Within one PID namespace
  only: builds in separate containers sharing a folder are not told apart.
- **Folders get the user's umask** (``os.mkdir``, never ``mkdtemp``'s 0700).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import json
import os
import re
import secrets
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator, Optional

from generator.files import blocking_file, cannot_write

MANIFEST_NAME = "exbind_manifest.json"
REPO_ROOT = Path(__file__).resolve().parent.parent
_SHOW = 10  # unexpected files named in a refusal

# Test hook: called with the name of each step of :func:`install` ("staged", "exchanged",
# "removed"); tests kill or raise here to simulate a crash between steps.
_AFTER_STEP: Optional[Callable[[str], None]] = None


class ExportPathError(ValueError):
    """The export folder cannot be written, or would overwrite something that is not a previous export."""


class ExportBusyError(ExportPathError):
    """Another build holds the lock on the same export folder."""


def _step(name: str) -> None:
    if _AFTER_STEP is not None:
        _AFTER_STEP(name)


def resolve_out(out_dir: os.PathLike | str) -> Path:
    """Absolute output path with the parent resolved but the last component kept (a symlink
    at ``--out`` is refused by :func:`check_export_target`; its target is never written into)."""
    out = Path(os.path.abspath(out_dir))
    return out.parent.resolve() / out.name


def _unexpected_entries(folder: Path, listed: set[str]) -> list[str]:
    """Paths under ``folder`` (relative, POSIX) that are not regular files listed in ``listed``,
    and empty folders that hold no listed file (``notes/``: a user's, which a build would delete)."""
    kept = {"/".join(rel.split("/")[:i]) for rel in listed for i in range(1, rel.count("/") + 1)}
    bad = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in list(dirs):
            path = Path(root, name)
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink():
                bad.append(rel)
                dirs.remove(name)
            elif rel not in kept and not any(os.scandir(path)):
                bad.append(rel + "/")
        for name in files:
            path = Path(root, name)
            rel = path.relative_to(folder).as_posix()
            if rel not in listed or path.is_symlink() or not path.is_file():
                bad.append(rel)
    return sorted(bad)


def _describe(paths: list[str]) -> str:
    more = f" and {len(paths) - _SHOW} more" if len(paths) > _SHOW else ""
    return ", ".join(paths[:_SHOW]) + more


def check_export_target(out_dir: os.PathLike | str) -> Path:
    """Refuse an export path whose replacement could delete anything but a previous export.

    Args:
        out_dir: requested export folder (``build --out``).

    Returns:
        The output path (:func:`resolve_out`).

    Raises:
        ExportPathError: when the path contains the working folder or this repository, is
            a symbolic link, a mount point, an existing file or under one, lies inside another
            export, or is a non-empty folder that is not exactly a previous export (no or
            unparsable ``exbind_manifest.json``, or files the manifest does not list; the
            message names them).
    """
    out = resolve_out(out_dir)
    protected = {Path.cwd().resolve(), REPO_ROOT}
    real = out.resolve()
    if any(p in (out, real) or out in p.parents or real in p.parents for p in protected):
        raise ExportPathError(f"--out {out_dir!s} contains the working folder or the repository; "
                              "choose a dedicated folder such as ./exbind")
    if out.is_symlink():  # the atomic exchange would replace the link, not the folder it names
        raise ExportPathError(f"--out {out_dir!s} is a symbolic link (to {os.readlink(out)}); "
                              "pass the folder itself")
    if out.exists() and not out.is_dir():
        raise ExportPathError(f"--out {out_dir!s} is an existing file; choose a folder path")
    if out.is_dir() and os.path.ismount(out):  # the finished export is renamed into place
        raise ExportPathError(f"--out {out_dir!s} is a mount point, which a build cannot replace (it renames the "
                              f"finished export into place); choose a folder inside it, e.g. {out / 'exbind'}")
    for parent in out.parents:  # writing inside another export would add files its manifest does not list
        if (parent / MANIFEST_NAME).is_file() and (parent / "README.md").is_file():
            raise ExportPathError(f"--out {out_dir!s} is inside the ExBind export {parent}; choose a folder "
                                  "outside it")
    blocker = blocking_file(out.parent)
    if blocker is not None:
        raise ExportPathError(cannot_write("--out", out_dir, f"{blocker} is not a directory"))
    try:
        if not out.is_dir() or not any(out.iterdir()):
            return out
    except OSError as exc:
        raise ExportPathError(f"--out {out_dir!s} cannot be read ({exc.strerror}); choose a folder you own") from None
    manifest_path = out / MANIFEST_NAME
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
            raise TypeError('expected an object with a "files" object')
        listed = set(manifest["files"])
    except FileNotFoundError:
        raise ExportPathError(f"--out {out_dir!s} is a non-empty folder that is not an ExBind export "
                              f"(no {MANIFEST_NAME}; it holds {_describe(sorted(p.name for p in out.iterdir()))}); "
                              "refusing to replace it. "
                              "Choose an empty or new folder") from None
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
        raise ExportPathError(f"--out {out_dir!s} is not an ExBind export: {MANIFEST_NAME} does not parse as an "
                              f"export manifest ({type(exc).__name__}: {exc}); refusing to replace the folder. "
                              "Choose an empty or new folder") from None
    unexpected = _unexpected_entries(out, listed | {MANIFEST_NAME})
    if unexpected:
        raise ExportPathError(f"--out {out_dir!s} holds {len(unexpected)} file(s) its {MANIFEST_NAME} does not list: "
                              f"{_describe(unexpected)}; refusing to replace the folder (a build would delete them). "
                              "Move them out, or choose another --out")
    return out


# --------------------------------------------------------------------------- lock


def lock_path(out: Path) -> Path:
    """The lock file of an output folder: ``.<name>.lock`` beside it."""
    return out.with_name(f".{out.name}.lock")


# Lock files this process holds (path -> pid), so that a nested export_lock on the same
# folder (the build command holds it while it plans, then export_release takes it) passes.
_HELD: dict = {}


@contextlib.contextmanager
def export_lock(out: Path) -> Iterator[Path]:
    """Hold an exclusive lock on ``out`` for the duration of the block (never waits).

    Also the writability check: the parent is created if needed and the lock file opened
    there, so an unwritable ``--out`` (``/proc/exbind``) fails here, before any generation.
    Re-entrant within a process: a nested block on the same ``out`` holds the lock already.

    Raises:
        ExportBusyError: another process holds the lock (its PID is in the message).
        ExportPathError: the parent folder cannot be created or written.
    """
    path = lock_path(out)
    if _HELD.get(str(path)) == os.getpid():
        yield path
        return
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ExportPathError(f"{path} is a symbolic link; refusing to use it as the lock file of {out} "
                                  "(remove it)") from None
        raise ExportPathError(f"cannot write the export at {out}: {exc.strerror} ({path}); "
                              "choose a writable --out") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ExportPathError(f"{path} is not a regular file; refusing to use it as the lock file of {out} (remove it)")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise ExportBusyError(f"another build holds the lock on {out} (pid {holder}, lock file {path}); "
                                  "wait for it to finish, or choose another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _HELD[str(path)] = os.getpid()
        try:
            yield path
        finally:
            _HELD.pop(str(path), None)
    finally:
        os.close(fd)  # releases the lock


# --------------------------------------------------------------------------- leftovers

_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)-[0-9a-f]+$")
_CACHE = re.compile(r"^exbind-cache-(?P<pid>\d+)-")


def pid_alive(pid: int) -> bool:
    """Whether a process with this PID exists (``kill(pid, 0)``; permission denied counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _token() -> str:
    return f"{os.getpid()}-{secrets.token_hex(4)}"


def staging_path(out: Path) -> Path:
    """A new name for the staging sibling of ``out``: ``.<name>.tmp-<pid>-<token>``; the caller
    creates it (``os.mkdir``, the user's umask) after keeping the name, so that Ctrl-C between
    the two leaves nothing it does not know of."""
    return out.with_name(f".{out.name}.tmp-{_token()}")


@contextlib.contextmanager
def cache_dir() -> Iterator[str]:
    """A ``datasets`` cache folder ``exbind-cache-<pid>-<token>`` in the system temporary folder, removed after."""
    path = Path(tempfile.gettempdir()) / f"exbind-cache-{_token()}"
    os.mkdir(path)
    try:
        yield str(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def clean_stale(out: Path) -> list[str]:
    """Remove leftovers of dead builds of ``out`` and dead ``exbind-cache-*`` folders (call under the lock).

    When ``out`` is missing and a dead build left ``.<name>.old-*`` (a kill inside the
    two-rename fallback), that old export is moved back to ``out`` first.

    Returns:
        The names removed or restored (``"restored <name>"``), sorted.
    """
    done = []
    leftovers = []
    for entry in out.parent.iterdir():
        m = _LEFTOVER.match(entry.name)
        if m and m["name"] == out.name and not pid_alive(int(m["pid"])):
            leftovers.append((m["kind"], entry))
    if not os.path.lexists(out):
        for kind, entry in sorted(leftovers, key=lambda e: e[1].name):
            if kind == "old":
                os.rename(entry, out)
                done.append(f"restored {entry.name}")
                leftovers.remove((kind, entry))
                break
    for _, entry in leftovers:
        _remove(entry)
        done.append(entry.name)
    tmp_root = Path(tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for entry in tmp_root.iterdir():
            m = _CACHE.match(entry.name)
            if m and entry.is_dir() and not entry.is_symlink() and not pid_alive(int(m["pid"])):
                shutil.rmtree(entry, ignore_errors=True)
                done.append(entry.name)
    return sorted(done)


# --------------------------------------------------------------------------- exchange

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2  # linux/fs.h
_RENAME_SWAP = 2  # macOS sys/stdio.h


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:
        return None


def exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two existing paths in one system call.

    Returns:
        True when exchanged; False when this system or file system has no such call
        (the caller falls back).

    Raises:
        OSError: any other failure of the call (nothing was changed).
    """
    libc = _libc()
    if libc is None:
        return False
    a_b, b_b = os.fsencode(a), os.fsencode(b)
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):
        rc = libc.renameat2(_AT_FDCWD, a_b, _AT_FDCWD, b_b, ctypes.c_uint(_RENAME_EXCHANGE))
    elif sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        rc = libc.renamex_np(a_b, b_b, ctypes.c_uint(_RENAME_SWAP))
    else:
        return False
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), os.fspath(a))


def install(staged: Path, out: Path, state: Optional[dict] = None) -> None:
    """Put the finished folder ``staged`` at ``out`` (call under :func:`export_lock`).

    ``out`` absent: one ``rename``. Otherwise one exchange (:func:`exchange`), after which
    the old export sits at ``staged`` and is removed; at every instant ``out`` is either
    the complete old or the complete new export. Fallback without an exchange call: two
    renames through ``.<name>.old-<pid>-<token>`` (recovered by :func:`clean_stale`).
    ``state["installed"]`` is set to True as soon as the new export is at ``out``.
    """
    state = {} if state is None else state
    _step("staged")
    if not os.path.lexists(out):
        os.rename(staged, out)
        state["installed"] = True
        _step("exchanged")
        return
    if exchange(staged, out):
        state["installed"] = True
        _step("exchanged")
        _remove(staged)
        _step("removed")
        return
    old = out.with_name(f".{out.name}.old-{_token()}")
    os.rename(out, old)
    _step("moved_old")
    os.rename(staged, out)
    state["installed"] = True
    _step("exchanged")
    _remove(old)
    _step("removed")


def kept_export(out_dir: Path) -> str:
    """What a build that stopped before its swap left at ``out_dir``, as a clause:
    ``the previous export at DIR is untouched``, or ``nothing was written to DIR`` when
    there was none."""
    if Path(out_dir).exists():
        return f"the previous export at {out_dir} is untouched"
    return f"nothing was written to {out_dir}"


class BuildInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`publishing.export.export_release`; ``installed`` says whether the
    new export was already in place."""

    def __init__(self, out_dir: Path, installed: bool):
        super().__init__(str(out_dir))
        self.out_dir, self.installed = out_dir, installed

    def message(self, by: str = "") -> str:
        """One line for the user; ``by`` names a signal other than Ctrl-C (``" by SIGTERM"``)."""
        if self.installed:
            return f"build interrupted{by} after the new export was installed at {self.out_dir}"
        return f"build interrupted{by}; {kept_export(self.out_dir)}"
