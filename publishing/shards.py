"""Streaming Parquet shards of one config (issue 13 item 4; docs/specification.md §10).

:class:`ConfigShardWriter` takes rows one at a time and writes them to
``data/<config>/test-<k>-of-<n>-<sha256[:16]>.parquet`` files in row groups of
:data:`ROW_GROUP_SIZE` rows with the page index (what the Hub viewer reads), holding at most
one row group in memory. A shard closes after :data:`SHARD_ROWS` rows or :data:`SHARD_BYTES`
of Arrow data, whichever comes first, so file boundaries depend only on the rows (the same
seeds give the same files). File names carry ``n`` and the SHA-256 of the file, so they are
given when the config is finished.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Optional

import pyarrow as pa
import pyarrow.parquet as pq

from generator.records import FEATURES, canonical_row_bytes
from publishing.card import VIEWER_ROW_GROUP_SIZE

ROW_GROUP_SIZE = VIEWER_ROW_GROUP_SIZE  # 100: small row groups keep image configs viewer-friendly
SHARD_ROWS = 10_000  # rows per Parquet file (a multiple of ROW_GROUP_SIZE)
SHARD_BYTES = 256 * 1024 * 1024  # Arrow bytes per Parquet file: image shards stay a few hundred MB at most


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class ConfigShardWriter:
    """Write one config's rows to Parquet shards in ``folder`` as they arrive.

    Args:
        folder: ``<export>/data/<config>`` (created).
        schema: the Arrow schema with the ``huggingface`` features metadata (default
            :data:`generator.records.FEATURES`).
        shard_rows, shard_bytes: when a shard closes (:data:`SHARD_ROWS`, :data:`SHARD_BYTES`).

    After :meth:`close`: ``files`` (paths relative to the export, in order), ``rows``,
    ``num_bytes`` (Arrow bytes, the card's ``num_bytes``) and ``records_sha256`` (the
    canonical records hash over every row, :func:`generator.records.canonical_row_bytes`;
    the rows as written and as ``datasets`` reads them back give the same lines, which
    ``tests/test_streaming.py`` checks on the loaded release).
    """

    def __init__(self, folder: Path, schema: Optional[pa.Schema] = None, shard_rows: int = SHARD_ROWS,
                 shard_bytes: int = SHARD_BYTES):
        if shard_rows % ROW_GROUP_SIZE:
            raise ValueError(f"shard_rows={shard_rows} must be a multiple of the row group size {ROW_GROUP_SIZE}")
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.schema = schema if schema is not None else FEATURES.arrow_schema
        self.shard_rows, self.shard_bytes = shard_rows, shard_bytes
        self.buffer: list[dict] = []
        self.parts: list[Path] = []
        self.writer: Optional[pq.ParquetWriter] = None
        self.shard_row_count = self.shard_byte_count = 0
        self.rows = self.num_bytes = 0
        self.hash = hashlib.sha256()
        self.files: list[str] = []
        self.records_sha256: Optional[str] = None

    def add(self, row: dict, canonical: Optional[bytes] = None) -> None:
        """Buffer one row (keys of the schema); a full row group is written at once.

        ``canonical``: the row's line of the records hash when the caller has it already
        (:meth:`generator.records.ExBindRecord.canonical_line`, computed in a pool worker);
        else :func:`generator.records.canonical_row_bytes` of ``row`` here."""
        self.buffer.append(row)
        self.hash.update(canonical if canonical is not None else canonical_row_bytes(row))
        if len(self.buffer) == ROW_GROUP_SIZE:
            self._flush()

    def _flush(self) -> None:
        if not self.buffer:
            return
        table = pa.Table.from_pylist(self.buffer, schema=self.schema)
        self.buffer = []
        if self.writer is None:
            part = self.folder / f"part-{len(self.parts):05d}.parquet"
            self.parts.append(part)
            self.writer = pq.ParquetWriter(part, self.schema, compression="zstd", write_page_index=True)
        self.writer.write_table(table, row_group_size=ROW_GROUP_SIZE)
        self.rows += table.num_rows
        self.num_bytes += table.nbytes
        self.shard_row_count += table.num_rows
        self.shard_byte_count += table.nbytes
        if self.shard_row_count >= self.shard_rows or self.shard_byte_count >= self.shard_bytes:
            self._close_shard()

    def _close_shard(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        self.shard_row_count = self.shard_byte_count = 0

    def abort(self) -> None:
        """Drop the buffered rows and the open shard after a failure (the caller removes the
        staging folder); an error closing the shard (a full disk) is ignored here."""
        self.buffer = []
        writer, self.writer = self.writer, None
        if writer is not None:
            try:
                writer.close()
            except OSError:
                pass

    def close(self, export_root: Path) -> list[str]:
        """Write the last row group, name every shard ``test-<k>-of-<n>-<sha256[:16]>.parquet``
        and return their paths relative to ``export_root``. A config without rows gets one
        empty shard (the card must name a file)."""
        self._flush()
        if not self.parts:
            part = self.folder / "part-00000.parquet"
            pq.write_table(self.schema.empty_table(), part, compression="zstd", write_page_index=True)
            self.parts.append(part)
        self._close_shard()
        n = len(self.parts)
        for k, part in enumerate(self.parts):
            final = self.folder / f"test-{k:05d}-of-{n:05d}-{sha256_file(part)[:16]}.parquet"
            os.replace(part, final)
            self.files.append(final.relative_to(export_root).as_posix())
        self.records_sha256 = self.hash.hexdigest()
        return self.files
