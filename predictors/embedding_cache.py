"""On-disk cache of sentence embeddings for ``rank_minilm`` (issue 13 item 3).

Encoding every candidate text with all-MiniLM-L6-v2 is most of the predictor report's
time; the texts repeat from build to build, so their embeddings are kept on disk and a
warm report neither encodes nor even loads the model.

Location and switches (read when a :class:`predictors.rankers.MiniLM` is created):

- ``$EXBIND_CACHE_DIR/embeddings/<model-hash>/`` when ``EXBIND_CACHE_DIR`` is set, else
  ``${XDG_CACHE_HOME:-~/.cache}/exbind/embeddings/<model-hash>/``.
- ``EXBIND_EMBEDDING_CACHE=0`` (also ``false``, ``no``, ``off``) turns the disk cache off:
  every text is encoded, as before the cache existed.

Keys:

- ``<model-hash>`` is :func:`model_hash`: SHA-256 over every file of the model folder
  (relative path, size and content), so a changed weight, tokenizer or config file gets a
  new folder and two identical copies share one. The hash is itself remembered in
  ``embeddings/model-hashes.json`` by (resolved path, and each file's relative path, size
  and mtime), so a warm run only stats the folder.
- A text's entry is the SHA-256 of its UTF-8 bytes (``surrogatepass``).
- Shard file names start with :func:`encoder_tag`, a hash of the torch, transformers and
  sentence-transformers versions and the device, because a different library build can
  change the last bits of an embedding; another environment's shards are left alone.

Shard format (``<tag>-<first 32 hex of the SHA-256 of the file body>.emb``), little endian::

    b"EXBEMB1\\n" | n: uint32 | dim: uint32 | model hash: 32 bytes
    | n text digests: n x 32 bytes | n x dim float32 vectors | SHA-256 of all the above: 32 bytes

The vectors are the exact float32 bytes the encoder returned, so a warm run's scores are
bit-identical to the run that filled the cache. (They are not always bit-identical to a
fresh encoding in *other* batches: a transformer's float32 output for a text moves in the
last bits, up to about 2e-7, with the batch it is encoded in. A run with the cache off
that encodes the same texts in the same calls gets the same bytes.) When two shards hold
the same text (two cold runs at once), the shard whose name sorts first wins.

Safety: every write goes to a temporary file in the same folder, then ``os.replace``, so
concurrent builds never see half a shard (the file gets the umask mode:
:func:`generator.files.write_bytes_atomic`); a shard whose size, checksum, model hash or
dimension is wrong is reported (:class:`EmbeddingCacheWarning`), ignored and removed, and
its texts are encoded again. Reads are bounded (:data:`MAX_SHARD_BYTES` per shard,
:data:`MAX_CACHE_BYTES` per model folder). An unwritable cache only warns: the report
then runs without it. When a folder holds more than :data:`MAX_SHARDS` shards of one tag
they are merged into one.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import time
import warnings
from importlib import metadata
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from generator.files import write_bytes_atomic

ENV_CACHE_DIR = "EXBIND_CACHE_DIR"
ENV_SWITCH = "EXBIND_EMBEDDING_CACHE"
MAGIC = b"EXBEMB1\n"
HEADER = struct.Struct("<II")
DIGEST = 32
MAX_SHARD_BYTES = 256 * 2**20
MAX_CACHE_BYTES = 1024 * 2**20
MAX_SHARDS = 16
MAX_DIM = 65536
MAX_HASH_MEMO_BYTES = 2**20
HASH_MEMO = "model-hashes.json"
_OFF = ("0", "false", "no", "off")
_ON = ("", "1", "true", "yes", "on")


class EmbeddingCacheWarning(UserWarning):
    """A cache file was unreadable, corrupted or could not be written (never fatal)."""


def cache_enabled() -> bool:
    """Whether the disk cache is on: ``EXBIND_EMBEDDING_CACHE`` unset or ``1/true/yes/on``.

    Raises:
        ValueError: any other value (the message names the variable and the accepted values).
    """
    value = os.environ.get(ENV_SWITCH, "").strip().lower()
    if value in _OFF:
        return False
    if value in _ON:
        return True
    raise ValueError(f"{ENV_SWITCH}={os.environ[ENV_SWITCH]!r} is not understood; "
                     f"set it to 0 (cache off) or 1 (cache on, the default)")


def cache_root() -> Path:
    """The folder that holds ``embeddings/``: ``$EXBIND_CACHE_DIR``, else
    ``${XDG_CACHE_HOME:-~/.cache}/exbind``."""
    explicit = os.environ.get(ENV_CACHE_DIR)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "exbind"


def text_digest(text: str) -> bytes:
    """The 32-byte SHA-256 of ``text`` in UTF-8 (lone surrogates kept with ``surrogatepass``)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def encoder_tag(device: str = "cpu") -> str:
    """16 hex characters naming the encoding environment: SHA-256 of the installed torch,
    transformers and sentence-transformers versions, the device and the normalisation."""
    parts = []
    for dist in ("torch", "transformers", "sentence-transformers"):
        try:
            parts.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist}=none")
    parts += [f"device={device}", "normalize=1"]
    return hashlib.sha256(";".join(parts).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- model hash


def _model_files(folder: Path) -> list[tuple[str, int, int]]:
    """``(relative posix path, size, mtime_ns)`` of every file under ``folder``, sorted."""
    out = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            st = path.stat()
            out.append((path.relative_to(folder).as_posix(), st.st_size, st.st_mtime_ns))
    return sorted(out)


def _hash_files(folder: Path, files: Sequence[tuple[str, int, int]]) -> str:
    total = hashlib.sha256()
    for rel, size, _ in files:
        h = hashlib.sha256()
        with open(folder / rel, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        total.update(f"{rel}\0{size}\0{h.hexdigest()}\n".encode("utf-8", "surrogatepass"))
    return total.hexdigest()


def _read_memo(path: Path) -> dict:
    try:
        if path.stat().st_size > MAX_HASH_MEMO_BYTES:
            return {}
        memo = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return memo if isinstance(memo, dict) else {}


def model_hash(model_path: str | os.PathLike, memo_dir: Optional[Path] = None) -> str:
    """SHA-256 (64 hex) over every file of a model folder: for each file in sorted relative
    path order, ``"{path}\\0{size}\\0{sha256 of content}\\n"``.

    Args:
        model_path: a model folder (e.g. the sentence-transformers folder of MiniLM).
        memo_dir: where ``model-hashes.json`` remembers the hash by (resolved path, and each
            file's relative path, size and mtime); None computes it every time.

    Raises:
        NotADirectoryError: ``model_path`` is not a folder.
    """
    folder = Path(model_path).resolve()
    if not folder.is_dir():
        raise NotADirectoryError(f"model_path {str(model_path)!r} is not a folder; "
                                 "pass a sentence-transformers model folder")
    files = _model_files(folder)
    stamp = [list(f) for f in files]
    memo_path = memo_dir / HASH_MEMO if memo_dir is not None else None
    if memo_path is not None:
        entry = _read_memo(memo_path).get(str(folder))
        if isinstance(entry, dict) and entry.get("files") == stamp and isinstance(entry.get("sha256"), str):
            return entry["sha256"]
    digest = _hash_files(folder, files)
    if memo_path is not None:
        memo = _read_memo(memo_path)
        memo[str(folder)] = {"files": stamp, "sha256": digest}
        memo = dict(list(memo.items())[-64:])  # a bounded memo: the 64 latest folders
        try:
            _atomic_write(memo_path, json.dumps(memo, sort_keys=True).encode())
        except OSError as exc:
            _warn(f"cannot write {memo_path}: {exc}")
    return digest


# --------------------------------------------------------------------------- shards


def _warn(message: str) -> None:
    warnings.warn(f"embedding cache: {message}", EmbeddingCacheWarning, stacklevel=3)


def _atomic_write(dest: Path, data: bytes) -> None:
    """Write ``data`` to ``dest`` atomically (:func:`generator.files.write_bytes_atomic`)."""
    write_bytes_atomic(dest, data)


def encode_shard(model_key: bytes, digests: Sequence[bytes], vectors: np.ndarray) -> bytes:
    """The bytes of one shard (format in the module docstring).

    Args:
        model_key: the 32 raw bytes of :func:`model_hash`.
        digests: n text digests (:func:`text_digest`), 32 bytes each.
        vectors: float32 array of shape (n, dim).

    Raises:
        ValueError: shapes or lengths do not agree.
    """
    vectors = np.asarray(vectors)
    if vectors.dtype != np.float32 or vectors.ndim != 2 or vectors.shape[0] != len(digests):
        raise ValueError(f"vectors must be float32 of shape ({len(digests)}, dim), got {vectors.dtype} {vectors.shape}")
    if len(model_key) != DIGEST or any(len(d) != DIGEST for d in digests):
        raise ValueError("model_key and every digest must be 32 bytes")
    body = (MAGIC + HEADER.pack(len(digests), vectors.shape[1]) + model_key + b"".join(digests)
            + vectors.astype("<f4", copy=False).tobytes())
    return body + hashlib.sha256(body).digest()


def decode_shard(data: bytes, model_key: bytes) -> tuple[list[bytes], np.ndarray]:
    """Parse and check one shard's bytes.

    Returns:
        ``(digests, vectors)``: n 32-byte digests and a float32 array of shape (n, dim).

    Raises:
        ValueError: wrong magic, size, checksum, model hash or dimension (the reason).
    """
    head = len(MAGIC) + HEADER.size + DIGEST
    if len(data) < head + DIGEST or not data.startswith(MAGIC):
        raise ValueError("not an embedding shard (bad magic or too short)")
    n, dim = HEADER.unpack_from(data, len(MAGIC))
    if not 1 <= dim <= MAX_DIM:
        raise ValueError(f"dimension {dim} out of range")
    expected = head + n * DIGEST + n * dim * 4 + DIGEST
    if len(data) != expected:
        raise ValueError(f"size {len(data)} bytes, expected {expected} (truncated or padded)")
    if hashlib.sha256(data[:-DIGEST]).digest() != data[-DIGEST:]:
        raise ValueError("checksum mismatch")
    if data[len(MAGIC) + HEADER.size:head] != model_key:
        raise ValueError("written for another model")
    digests = [data[head + i * DIGEST: head + (i + 1) * DIGEST] for i in range(n)]
    start = head + n * DIGEST
    vectors = np.frombuffer(data, dtype="<f4", count=n * dim, offset=start).reshape(n, dim)
    return digests, vectors.astype(np.float32)  # a writable copy, the same bits


class EmbeddingStore:
    """The shards of one model (one ``<model-hash>`` folder) and encoding environment.

    Args:
        folder: ``<cache root>/embeddings/<model-hash>``.
        model_hex: the model hash (64 hex), checked against every shard.
        tag: :func:`encoder_tag`; only shards named ``<tag>-*.emb`` are read or merged.
    """

    def __init__(self, folder: Path, model_hex: str, tag: str):
        self.folder = Path(folder)
        self.model_key = bytes.fromhex(model_hex)
        self.tag = tag
        self.writable = True

    def shard_paths(self) -> list[Path]:
        """This tag's shard files, sorted by name (the first holding a text wins)."""
        try:
            return sorted(self.folder.glob(f"{self.tag}-*.emb"))
        except OSError:
            return []

    def _read(self, path: Path, budget: int) -> Optional[tuple[list[bytes], np.ndarray]]:
        """One shard, or None when it is missing, too large for ``budget`` or corrupted
        (then it is removed, with a warning)."""
        try:
            size = path.stat().st_size
            if size > min(MAX_SHARD_BYTES, budget):
                _warn(f"skipping {path.name}: {size} bytes is over the read limit")
                return None
            with open(path, "rb") as f:
                data = f.read(size + 1)
        except FileNotFoundError:  # merged away by another process meanwhile
            return None
        except OSError as exc:
            _warn(f"cannot read {path}: {exc}")
            return None
        try:
            return decode_shard(data, self.model_key)
        except ValueError as exc:
            _warn(f"ignoring {path} ({exc}); its texts are encoded again")
            try:
                path.unlink()
            except OSError:
                pass
            return None

    def load(self) -> dict[bytes, np.ndarray]:
        """Every cached vector: ``{text digest: float32 vector (dim,)}``; merges the shards
        into one when there are more than :data:`MAX_SHARDS`."""
        found: dict[bytes, np.ndarray] = {}
        read: list[Path] = []
        budget, dim = MAX_CACHE_BYTES, None
        for path in self.shard_paths():
            shard = self._read(path, budget)
            if shard is None:
                continue
            digests, vectors = shard
            if dim is None:
                dim = vectors.shape[1]
            elif vectors.shape[1] != dim:
                _warn(f"ignoring {path.name}: dimension {vectors.shape[1]}, other shards have {dim}")
                continue
            budget -= vectors.nbytes + len(digests) * DIGEST
            read.append(path)
            for d, v in zip(digests, vectors):
                found.setdefault(d, v)
        if len(read) > MAX_SHARDS and found:
            self._merge(found, read)
        return found

    def add(self, digests: Sequence[bytes], vectors: np.ndarray) -> Optional[Path]:
        """Write one new shard (atomically); returns its path, or None when nothing was
        written (no entries, or the folder is not writable: warned once per store)."""
        if not len(digests) or not self.writable:
            return None
        data = encode_shard(self.model_key, digests, vectors)
        if len(data) > MAX_SHARD_BYTES:
            _warn(f"not caching {len(digests)} embeddings: a shard of {len(data)} bytes is over the read limit")
            return None
        dest = self.folder / f"{self.tag}-{hashlib.sha256(data).hexdigest()[:32]}.emb"
        try:
            if not dest.exists():
                _atomic_write(dest, data)
        except OSError as exc:
            self.writable = False
            _warn(f"cannot write to {self.folder} ({exc}); continuing without saving embeddings")
            return None
        return dest

    def _merge(self, found: dict[bytes, np.ndarray], read: list[Path]) -> None:
        """Replace the shards just read by one shard holding their winners; stale
        temporary files (over an hour old) go too. Another process's new shards are kept."""
        keys = sorted(found)
        merged = self.add(keys, np.stack([found[k] for k in keys]))
        if merged is None:
            return
        for path in read:
            if path != merged:
                try:
                    path.unlink()
                except OSError:
                    pass
        for tmp in self.folder.glob(".tmp-*.part"):
            try:
                if time.time() - tmp.stat().st_mtime > 3600:
                    tmp.unlink()
            except OSError:
                pass


def open_store(model_path: str, device: str = "cpu") -> Optional[EmbeddingStore]:
    """The store for a model folder, or None when the cache is off
    (``EXBIND_EMBEDDING_CACHE=0``), ``model_path`` is not a folder, or the folder cannot
    be hashed (warned).

    Raises:
        ValueError: ``EXBIND_EMBEDDING_CACHE`` has a value that is neither on nor off.
    """
    if not cache_enabled() or not Path(model_path).is_dir():
        return None
    base = cache_root() / "embeddings"
    try:
        digest = model_hash(model_path, base)
    except OSError as exc:
        _warn(f"cannot hash model folder {model_path} ({exc}); running without the cache")
        return None
    return EmbeddingStore(base / digest, digest, encoder_tag(device))
