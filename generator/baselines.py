"""The four gate baselines (docs/specification.md §7; paper Table 6), usable as gates and as predictors.

Each baseline maps a dataset row (or a row dict before export) to a raw output string,
which the core scorer then scores like any model output. Baselines *abstain on ties*:
they answer only when their choice is unique, and an abstention is the empty output
``""`` (scored ``unresolved``). So a baseline "solves" a case exactly when its choice is
the unique gold; the build's gate table and the predictors table therefore agree.

- random: no single output; its score is the analytical expectation mean(1/|C|), over
  ordered endpoint pairs for graph (|C|(|C|-1)).
- lexical-only: token overlap between the instruction and each candidate's
  ``candidate_text`` (its visible text); answers only a unique maximum.
- type-only: answers only when exactly one candidate has the expected candidate type.
- structural oracle: runs the target spec against the latent record
  (:func:`exbind_scoring.execute_target`), never reading ``gold``.
"""

from __future__ import annotations

import json

from exbind_scoring import execute_target, load_reference, tokenize

ABSTAIN = ""
GATE_BASELINES = ("lexical_only", "type_only", "structural_oracle")


def random_expectation(reference: str) -> float:
    """Chance of a uniformly random candidate being exact: 1/|C| (graph 1/(|C|(|C|-1)))."""
    ref = load_reference(reference)
    n = len(ref["candidates"])
    if ref["family"] == "graph":
        return 1.0 / (n * (n - 1)) if n > 1 else 0.0
    return 1.0 / n if n else 0.0


def candidate_texts(reference: str) -> list[tuple[str, str]]:
    """``(candidate_id, candidate_text)`` pairs in released order (docs/specification.md §7's one textualisation)."""
    return [(c["id"], c.get("text", "")) for c in load_reference(reference)["candidates"]]


def lexical_overlaps(instruction: str, reference: str) -> list[tuple[str, int]]:
    """``(candidate_id, |tokens(instruction) & tokens(candidate_text)|)`` in released order."""
    words = tokenize(instruction)
    return [(cid, len(words & tokenize(text))) for cid, text in candidate_texts(reference)]


def _unique_top(scored: list[tuple[str, int]]) -> str | None:
    if not scored:
        return None
    best = max(s for _, s in scored)
    top = [cid for cid, s in scored if s == best]
    return top[0] if len(top) == 1 and best > 0 else None


def lexical_only(instruction: str, reference: str) -> str:
    """Lexical-only output: the unique top-overlap candidate, else abstain.

    Graph cases need an ordered pair: the two top-overlap nodes when both are strictly
    above every other node, ordered by where their name first occurs in the instruction.
    """
    ref = load_reference(reference)
    scored = lexical_overlaps(instruction, reference)
    if ref["family"] != "graph":
        choice = _unique_top(scored)
        return ABSTAIN if choice is None else json.dumps({ref["output_keys"][0]: choice})
    ranked = sorted(scored, key=lambda p: -p[1])
    if len(ranked) < 2 or ranked[1][1] == 0 or (len(ranked) > 2 and ranked[2][1] == ranked[1][1]):
        return ABSTAIN
    if ranked[0][1] == ranked[1][1] and len(ranked) > 2 and ranked[2][1] == ranked[0][1]:
        return ABSTAIN
    texts = dict(candidate_texts(reference))
    low = instruction.lower()
    pair = sorted((ranked[0][0], ranked[1][0]), key=lambda cid: _first_position(low, texts[cid]))
    return json.dumps({"source_id": pair[0], "target_id": pair[1]})


def _first_position(instruction_lower: str, text: str) -> int:
    positions = [instruction_lower.find(tok) for tok in tokenize(text)]
    positions = [p for p in positions if p >= 0]
    return min(positions) if positions else len(instruction_lower)


def type_only(instruction: str, reference: str) -> str:
    """Type-only output: the unique candidate of the gold's candidate type, else abstain.

    The expected type is the type of the target's surface form (known to any user from the
    output schema); graph needs two distinct nodes, so it always abstains.
    """
    ref = load_reference(reference)
    if ref["family"] == "graph":
        return ABSTAIN
    key = ref["output_keys"][0]
    expected = ref["_by_id"][ref["gold"][key]]["type"]
    of_type = [c["id"] for c in ref["candidates"] if c["type"] == expected]
    return json.dumps({key: of_type[0]}) if len(of_type) == 1 else ABSTAIN


def structural_oracle(instruction: str, reference: str) -> str:
    """Structural-oracle output: the unique reference the latent executor returns."""
    hits = execute_target(load_reference(reference))
    return json.dumps(hits[0]) if len(hits) == 1 else ABSTAIN


BASELINE_FUNCTIONS = {
    "lexical_only": lexical_only,
    "type_only": type_only,
    "structural_oracle": structural_oracle,
}
