"""Output files: the mode of atomically written files and the checks of output paths.

- Writers that go through a temporary file and ``os.replace`` create it with
  :func:`make_temp_file`, which gives it the mode ``open`` would (``0o666 & ~umask``), not
  ``tempfile.mkstemp``'s 0600, so every output of the project has the same mode.
- Commands check their output paths with :func:`check_output_path` before doing the work,
  so a path that cannot be written is one line (:func:`cannot_write`) and exit status 2,
  never a traceback after the report was printed.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Callable, Optional


def _read_umask() -> int:
    """The process umask; ``os.umask`` can only be read by setting it, so it is set back at once."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# Read once, at import (before any worker thread writes a file), never changed here.
_UMASK = _read_umask()


def file_mode() -> int:
    """The mode ``open`` gives a new file under this process's umask: ``0o666 & ~umask``."""
    return 0o666 & ~_UMASK


def make_temp_file(folder: str | os.PathLike, prefix: str, suffix: str) -> tuple[int, str]:
    """``tempfile.mkstemp`` in ``folder`` with the file mode of :func:`file_mode` (not 0600).

    Returns:
        ``(fd, path)`` as ``mkstemp``; the caller writes, then ``os.replace``\\ s the path.
    """
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=folder)
    try:
        os.fchmod(fd, file_mode())
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, tmp


def replaced_node(path: str | os.PathLike) -> Optional[str]:
    """What an atomic write (a new file renamed over ``path``) would destroy at ``path`` other
    than a regular file or a folder: ``"a symbolic link"``, ``"a device"``, ``"a FIFO"`` or
    ``"a socket"``; None when ``path`` is absent, a regular file or a folder."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def refuse_replacing(dest: str | os.PathLike) -> None:
    """Raise ``OSError`` (``EEXIST``, the message naming the node) when an atomic write would
    replace a symbolic link, device, FIFO or socket at ``dest`` (:func:`replaced_node`); the
    output writers call it, so no command turns ``/dev/null`` into a regular file."""
    node = replaced_node(dest)
    if node:
        raise OSError(errno.EEXIST, f"{dest} is {node}; an output replaces its path, so choose a regular file path")


def write_atomic(dest: str | os.PathLike, fill: Callable[[BinaryIO], Any]) -> Path:
    """Write ``dest`` through a temporary file in the same folder (mode of :func:`file_mode`):
    ``fill(binary_file)`` writes the content, then fsync and ``os.replace``, so readers see
    the old file or the whole new one, never a part. Parent folders are created. The one
    atomic-write mechanism of the project's outputs (:func:`write_bytes_atomic`,
    :func:`predictors.io.write_jsonl`).

    Returns:
        ``dest`` as a :class:`~pathlib.Path`.

    Raises:
        OSError: the folder cannot be written, or ``dest`` is a symbolic link, device, FIFO or
            socket (:func:`refuse_replacing`). Whatever ``fill`` raises passes through. In
            every case ``dest`` is left as it was and the temporary file is removed.
    """
    dest = Path(dest)
    refuse_replacing(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = make_temp_file(dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return dest


def write_bytes_atomic(dest: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``dest`` atomically (:func:`write_atomic`); returns ``dest`` as a
    :class:`~pathlib.Path`.

    Raises:
        OSError: as :func:`write_atomic`.
    """
    return write_atomic(dest, lambda f: f.write(data))


class OutputPathError(ValueError):
    """An output path that cannot be written; the message is one line naming the option and the fix."""


def cannot_write(option: str, path: str | os.PathLike, reason: str) -> str:
    """The one-line message for an output path that cannot be written, e.g.
    ``--per-case /proc/x/y.jsonl: cannot write there (No such file or directory); choose a writable path``."""
    return f"{option} {path}: cannot write there ({reason}); choose a writable path"


def blocking_file(folder: str | os.PathLike) -> Optional[Path]:
    """The nearest existing ancestor of ``folder`` (itself included) when it is not a folder,
    so ``folder`` cannot be created under it; ``None`` when it can be."""
    path = Path(os.path.abspath(folder))
    while not os.path.exists(path) and path != path.parent:
        path = path.parent
    return None if path.is_dir() else path


def check_output_path(option: str, path: str | os.PathLike, *, folder: bool = False,
                      inputs: Optional[dict] = None, export: Optional[str | os.PathLike] = None,
                      folders: Optional[dict] = None) -> Path:
    """Check an output path before any work, creating its missing parent folders.

    Args:
        option: the command-line option that named it (``--per-case``), for the message.
        path: the file to write, or with ``folder`` the folder to write files into.
        folder: ``path`` is a folder (``--plots DIR``): it may exist as a folder.
        inputs: ``{option: path}`` of files the command reads (and other outputs already
            checked): ``path`` may be none of them, so nothing is overwritten while read.
        export: the export folder the command reads: ``path`` may not be in it (writing
            there would change a file its manifest hashes).
        folders: ``{label: folder}`` of other folders the command reads (run folders):
            ``path`` may not be in them either.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OutputPathError: ``path`` is an existing folder (a file was asked for) or an existing
            file (a folder was asked for), a symbolic link, device, FIFO or socket
            (:func:`replaced_node`), an input, or inside the export or ``folders``; or its
            parent is not a folder, cannot be created or is not writable.
    """
    path = Path(path)
    not_regular = replaced_node(path)
    if not_regular and not (folder and not path.is_symlink() and path.is_dir()):
        raise OutputPathError(f"{option} {path} is {not_regular}; choose a regular file path "
                              "(an output is written to a new file that replaces the path)")
    real = path.resolve()
    for other_option, other in (inputs or {}).items():
        if other is not None and Path(other).resolve() == real:
            raise OutputPathError(f"{option} {path} is also {other_option}; choose another path")
    for label, root in ([("the export", export)] if export is not None else []) + list((folders or {}).items()):
        if root is None:
            continue
        resolved = Path(root).resolve()
        if real == resolved or resolved in real.parents:
            raise OutputPathError(f"{option} {path} is inside {label} {root}; choose a path outside it")
    if folder and path.exists() and not path.is_dir():
        raise OutputPathError(f"{option} {path} is an existing file; choose a folder path")
    if not folder and path.is_dir():
        raise OutputPathError(f"{option} {path} is a directory; choose a file path")
    target = path if folder and path.is_dir() else path.parent
    blocker = blocking_file(target)
    if blocker is not None:
        raise OutputPathError(cannot_write(option, path, f"{blocker} is not a directory"))
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(cannot_write(option, path, exc.strerror or type(exc).__name__)) from None
    try:  # a real probe: os.access says yes to root even where the filesystem says no (/proc, /sys)
        fd, probe = tempfile.mkstemp(prefix=".exbind-write-probe-", dir=target)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputPathError(cannot_write(option, path, exc.strerror or os.strerror(errno.EACCES))) from None
    return path
