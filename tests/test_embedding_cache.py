"""The on-disk MiniLM embedding cache (issue 13 item 3): identical rankings and scores with
a cold cache, a warm cache and the cache off; corrupted shards recomputed; model-hash
keying; atomic, bounded, never fatal. Every test uses its own cache folder under the
session's temporary ``EXBIND_CACHE_DIR`` (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from generator.baselines import candidate_texts
from predictors import embedding_cache as ec
from predictors.rankers import MiniLM, default_model_path, gold_item, rank_case, rank_of

TEXTS = ["In the row for the project whose region is Iberia, pick the owner cell.", "Iberia", "owner", "",
         "Team B", "module \"Module X\""]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh, empty cache root for one test, with the cache on."""
    root = tmp_path / "cache"
    monkeypatch.setenv(ec.ENV_CACHE_DIR, str(root))
    monkeypatch.delenv(ec.ENV_SWITCH, raising=False)
    return root


def _shards(root: Path) -> list[Path]:
    return sorted(root.glob("embeddings/*/*.emb"))


def _vectors(model: MiniLM, texts=TEXTS) -> list[bytes]:
    model.prefetch(texts)
    return [model.embed(t).tobytes() for t in texts]


def _rank_rows(rows: list[dict], model: MiniLM):
    """Cosines, rankings and gold ranks of ``rank_minilm``, the texts prefetched in one call
    as :func:`predictors.predict` does."""
    texts = [r["instruction"] for r in rows] + [t for r in rows for _, t in candidate_texts(r["reference"])]
    model.prefetch(texts)
    cosines = [model.cosine_scores(r["instruction"], [t for _, t in candidate_texts(r["reference"])]) for r in rows]
    rankings = [rank_case(r["case_id"], r["instruction"], r["reference"], "rank_minilm", minilm=model) for r in rows]
    ranks = [rank_of(k, gold_item(r["reference"])) for k, r in zip(rankings, rows)]
    return cosines, rankings, ranks


# --------------------------------------------------------------------------- identical results


def test_cold_warm_and_off_give_identical_rankings_and_scores(rows, cache_dir, monkeypatch):
    small = rows["targeted_hierarchy"][:12]
    cold = MiniLM()
    got_cold = _rank_rows(small, cold)
    assert cold._model is not None and len(_shards(cache_dir)) == 1

    warm = MiniLM()
    got_warm = _rank_rows(small, warm)
    assert warm._model is None  # every text came from disk: the model never loaded
    assert len(_shards(cache_dir)) == 1  # nothing new to write

    monkeypatch.setenv(ec.ENV_SWITCH, "0")
    off = MiniLM()
    assert off.store is None
    got_off = _rank_rows(small, off)

    assert got_cold == got_warm == got_off  # floats compared exactly
    ranks = got_cold[2]
    assert ranks == [6, 2, 4, 9, 9, 4, 1, 8, 7, 9, 11, 13]
    assert sum(Fraction(1, r) for r in ranks) / len(ranks) == Fraction(23509, 96096)
    texts = sorted({r["instruction"] for r in small})
    assert [warm.embed(t).tobytes() for t in texts] == [cold.embed(t).tobytes() for t in texts]


def test_warm_vectors_are_the_exact_float32_bytes(cache_dir):
    cold = _vectors(MiniLM())
    warm_model = MiniLM()
    assert _vectors(warm_model) == cold
    assert warm_model._model is None
    v = warm_model.embed("Iberia")
    assert v.dtype == np.float32 and v.shape == (384,) and v.flags.writeable


# --------------------------------------------------------------------------- corruption


def _flip_vector_byte(data: bytes) -> bytes:
    i = len(data) - 40  # inside the last vector
    return data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:]


@pytest.mark.parametrize("damage, reason", [
    (_flip_vector_byte, "checksum mismatch"),
    (lambda d: d[:-100], "truncated or padded"),
    (lambda d: d + b"\0", "truncated or padded"),
    (lambda d: b"garbage", "bad magic or too short"),
    (lambda d: b"", "bad magic or too short"),
])
def test_a_corrupted_shard_is_ignored_and_recomputed(cache_dir, damage, reason):
    cold = _vectors(MiniLM())
    (shard,) = _shards(cache_dir)
    original = shard.read_bytes()
    shard.write_bytes(damage(original))
    again = MiniLM()
    with pytest.warns(ec.EmbeddingCacheWarning, match=reason):
        got = _vectors(again)
    assert got == cold  # recomputed in the same batch: the same bits
    assert again._model is not None
    # The damaged file was removed and the recomputed shard, identical, written again.
    assert _shards(cache_dir) == [shard] and shard.read_bytes() == original


def test_a_shard_of_another_model_is_refused(cache_dir, tmp_path):
    model = MiniLM()
    _vectors(model)
    (shard,) = _shards(cache_dir)
    digests, vectors = ec.decode_shard(shard.read_bytes(), model.store.model_key)
    foreign = ec.encode_shard(bytes(32), digests, vectors)
    shard.write_bytes(foreign)
    with pytest.warns(ec.EmbeddingCacheWarning, match="written for another model"):
        assert MiniLM().store.load() == {}


def test_oversized_shards_are_skipped_not_deleted(cache_dir, monkeypatch):
    _vectors(MiniLM())
    (shard,) = _shards(cache_dir)
    monkeypatch.setattr(ec, "MAX_SHARD_BYTES", shard.stat().st_size - 1)
    with pytest.warns(ec.EmbeddingCacheWarning, match="over the read limit"):
        assert MiniLM().store.load() == {}
    assert shard.exists()


# --------------------------------------------------------------------------- keys and location


def _fake_model(folder: Path, weights: bytes) -> Path:
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    return folder


def test_model_hash_keys_the_folder_by_content(cache_dir, tmp_path):
    a = _fake_model(tmp_path / "a", b"weights-1")
    b = _fake_model(tmp_path / "b", b"weights-2")
    a_copy = _fake_model(tmp_path / "a_copy", b"weights-1")
    store_a, store_b, store_copy = (ec.open_store(str(p)) for p in (a, b, a_copy))
    assert store_a.folder != store_b.folder  # different weights: different folder
    assert store_a.folder == store_copy.folder  # the same files elsewhere share one
    assert store_a.folder == cache_dir / "embeddings" / ec.model_hash(a)
    assert store_a.folder.name == ec.model_hash(a)
    # The expected value, by the documented recipe.
    import hashlib
    lines = [f"{rel}\0{len(data)}\0{hashlib.sha256(data).hexdigest()}\n" for rel, data in
             [("1_Pooling/config.json", b'{"pooling_mode_mean_tokens": true}'), ("model.safetensors", b"weights-1")]]
    assert ec.model_hash(a) == hashlib.sha256("".join(lines).encode()).hexdigest()


def test_model_hash_is_remembered_by_path_size_and_mtime(cache_dir, tmp_path):
    a = _fake_model(tmp_path / "a", b"weights-1")
    first = ec.model_hash(a, cache_dir)
    memo = json.loads((cache_dir / ec.HASH_MEMO).read_text())
    assert memo[str(a.resolve())]["sha256"] == first
    assert [f[:2] for f in memo[str(a.resolve())]["files"]] == [["1_Pooling/config.json", 34], ["model.safetensors", 9]]
    # Same size and mtime: the memo answers (the content is not read again).
    st = (a / "model.safetensors").stat()
    (a / "model.safetensors").write_bytes(b"weights-X")
    os.utime(a / "model.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert ec.model_hash(a, cache_dir) == first
    # A new mtime: hashed again.
    os.utime(a / "model.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert ec.model_hash(a, cache_dir) == ec.model_hash(a) != first
    (cache_dir / ec.HASH_MEMO).write_text("{not json")  # a broken memo is ignored
    assert ec.model_hash(a, cache_dir) == ec.model_hash(a)


def test_the_real_model_in_another_folder_gets_another_cache_folder(cache_dir, tmp_path):
    src = Path(default_model_path())
    other = tmp_path / "minilm-variant"
    for path in src.rglob("*"):
        if path.is_file():
            dest = other / path.relative_to(src)
            dest.parent.mkdir(parents=True, exist_ok=True)
            if path.name == "README.md":
                dest.write_text(path.read_text() + "\nlocal copy\n")
            else:
                dest.symlink_to(path)
    default, variant = MiniLM(), MiniLM(str(other))
    assert default.store.folder != variant.store.folder
    assert default.store.folder.parent == variant.store.folder.parent == cache_dir / "embeddings"
    assert default.store.tag == variant.store.tag == ec.encoder_tag("cpu")


def test_location_and_switch(monkeypatch, tmp_path):
    monkeypatch.delenv(ec.ENV_CACHE_DIR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ec.cache_root() == tmp_path / "xdg" / "exbind"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert ec.cache_root() == tmp_path / "home" / ".cache" / "exbind"
    monkeypatch.setenv(ec.ENV_CACHE_DIR, str(tmp_path / "mine"))
    assert ec.cache_root() == tmp_path / "mine"
    for value, expected in [("0", False), ("off", False), ("FALSE", False), ("1", True), ("", True), ("yes", True)]:
        monkeypatch.setenv(ec.ENV_SWITCH, value)
        assert ec.cache_enabled() is expected
    monkeypatch.setenv(ec.ENV_SWITCH, "maybe")
    with pytest.raises(ValueError, match=r"EXBIND_EMBEDDING_CACHE='maybe' is not understood; set it to 0"):
        ec.cache_enabled()


def test_cache_off_writes_nothing(cache_dir, monkeypatch):
    monkeypatch.setenv(ec.ENV_SWITCH, "0")
    model = MiniLM()
    _vectors(model)
    assert model.store is None and not cache_dir.exists()


def test_an_unwritable_cache_warns_and_still_answers(cache_dir, monkeypatch, tmp_path):
    expected = _vectors(MiniLM(disk_cache=False))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(ec.ENV_CACHE_DIR, str(blocker))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = MiniLM()
        got = _vectors(model)
    assert got == expected
    messages = [str(w.message) for w in caught if w.category is ec.EmbeddingCacheWarning]
    assert any("cannot write" in m and "continuing without saving embeddings" in m for m in messages)
    assert model.store.writable is False


# --------------------------------------------------------------------------- shards


def _store(tmp_path: Path) -> ec.EmbeddingStore:
    return ec.EmbeddingStore(tmp_path / "store", "ab" * 32, "0123456789abcdef")


def test_shard_round_trip_and_errors():
    key = bytes(range(32))
    digests = [ec.text_digest(t) for t in ("a", "b")]
    vectors = np.array([[1.0, -0.5, 2.0**-149], [0.0, 3.5, -0.0]], dtype=np.float32)
    data = ec.encode_shard(key, digests, vectors)
    assert len(data) == 8 + 8 + 32 + 2 * 32 + 2 * 3 * 4 + 32
    got_digests, got = ec.decode_shard(data, key)
    assert got_digests == digests and got.tobytes() == vectors.tobytes()
    with pytest.raises(ValueError, match="written for another model"):
        ec.decode_shard(data, bytes(32))
    with pytest.raises(ValueError, match=r"vectors must be float32 of shape \(2, dim\), got float64"):
        ec.encode_shard(key, digests, vectors.astype(np.float64))
    with pytest.raises(ValueError, match="32 bytes"):
        ec.encode_shard(key[:5], digests, vectors)
    assert ec.text_digest("\ud800") == __import__("hashlib").sha256(b"\xed\xa0\x80").digest()


def test_many_shards_are_merged_first_one_winning(tmp_path, monkeypatch):
    monkeypatch.setattr(ec, "MAX_SHARDS", 3)
    store = _store(tmp_path)
    rng = np.random.default_rng(0)
    written = []
    for i in range(5):
        vecs = rng.standard_normal((2, 4)).astype(np.float32)
        digests = [ec.text_digest(f"t{i}"), ec.text_digest("shared")]
        written.append((store.add(digests, vecs), dict(zip(digests, vecs))))
    first_shared = min(written, key=lambda w: w[0].name)[1][ec.text_digest("shared")]
    (tmp_path / "store" / ".tmp-old.part").write_bytes(b"x")
    os.utime(tmp_path / "store" / ".tmp-old.part", (0, 0))
    found = store.load()
    assert len(found) == 6
    assert found[ec.text_digest("shared")].tobytes() == first_shared.tobytes()
    for i, (_, entries) in enumerate(written):
        assert found[ec.text_digest(f"t{i}")].tobytes() == entries[ec.text_digest(f"t{i}")].tobytes()
    (merged,) = store.shard_paths()
    assert not (tmp_path / "store" / ".tmp-old.part").exists()
    reread = store.load()
    assert {k: v.tobytes() for k, v in reread.items()} == {k: v.tobytes() for k, v in found.items()}
    assert store.shard_paths() == [merged]


def test_writes_are_atomic_and_content_named(tmp_path):
    store = _store(tmp_path)
    vecs = np.ones((1, 4), dtype=np.float32)
    path = store.add([ec.text_digest("x")], vecs)
    assert path.name.startswith("0123456789abcdef-") and path.suffix == ".emb"
    assert store.add([ec.text_digest("x")], vecs) == path  # the same content: the same file
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == [path.name]  # no temporary left
    assert store.add([], np.zeros((0, 4), dtype=np.float32)) is None


_WRITER = """
import sys
sys.path.insert(0, {root!r})
import numpy as np
from pathlib import Path
from predictors import embedding_cache as ec
ec.MAX_SHARDS = 4
store = ec.EmbeddingStore(Path({folder!r}), "ab" * 32, "0123456789abcdef")
for i in range(30):
    # The same text always gets the same vector, so every shard agrees with every other.
    texts = [f"t{{(i * 7 + j) % 50}}" for j in range(3)] + [f"w{worker}-{{i}}"]
    vecs = np.stack([np.full(4, sum(map(ord, t)), dtype=np.float32) for t in texts])
    store.add([ec.text_digest(t) for t in texts], vecs)
    if i % 5 == 0:
        store.load()  # merges while the other writer writes
"""


def test_concurrent_writers_and_mergers_never_corrupt(tmp_path):
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parent.parent)
    folder = tmp_path / "store"
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER.format(root=root, folder=str(folder), worker=w)])
             for w in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a corrupted shard would warn
        found = _store(tmp_path).load()
    texts = [f"t{k}" for k in range(50)] + [f"w{w}-{i}" for w in range(3) for i in range(30)]
    expected = {ec.text_digest(t): np.full(4, sum(map(ord, t)), dtype=np.float32) for t in texts}
    # Every text any writer saved is there, with its vector; nothing else.
    covered = {ec.text_digest(f"t{(i * 7 + j) % 50}") for i in range(30) for j in range(3)}
    assert set(found) == covered | {ec.text_digest(f"w{w}-{i}") for w in range(3) for i in range(30)}
    assert all(found[k].tobytes() == expected[k].tobytes() for k in found)
    assert not list(folder.glob(".tmp-*"))
