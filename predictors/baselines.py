"""The four gate baselines as predictors (docs/specification.md §7; paper Table 6; issue 4).

- ``lexical_only``, ``type_only``, ``structural_oracle``: the outputs of
  :data:`generator.baselines.BASELINE_FUNCTIONS` (the very functions the build's gates
  score), so they abstain on ties exactly as the gates do (abstention = empty output
  ``""``, scored ``unresolved``) and their exact accuracy per suite equals the manifest's
  gate table.
- ``random``: one uniformly random candidate per case (graph: an ordered pair of two
  distinct node candidates), drawn from :func:`predictors.rankers.case_generator` with
  purpose ``"random"``. It never abstains. Its *expected* exact accuracy is the gate
  table's analytical value, :func:`generator.baselines.random_expectation` (1/|C|, graph
  1/(|C|(|C|-1))); one realisation scatters around it.
"""

from __future__ import annotations

import json

from exbind_scoring import load_reference
from generator.baselines import BASELINE_FUNCTIONS
from predictors.rankers import DEFAULT_SEED, case_generator

GATE_PREDICTORS = ("random", "lexical_only", "type_only", "structural_oracle")


def random_output(case_id: str, reference: str, seed: int = DEFAULT_SEED) -> str:
    """The random predictor's raw output for one case, e.g. ``'{"cell_id": "cell_r02_c01"}'``.

    Args:
        case_id: the row's case id (with ``seed``, it seeds the case's generator).
        reference: the row's ``reference`` JSON string (its candidate inventory).
        seed: the run's seed.

    Returns:
        A JSON object keyed like the output schema; ``""`` only for an empty inventory
        (graph: fewer than two candidates).
    """
    ref = load_reference(reference)
    ids = [c["id"] for c in ref["candidates"]]
    rng = case_generator(case_id, seed, "random")
    if ref["family"] == "graph":
        if len(ids) < 2:
            return ""
        s, t = rng.choice(len(ids), size=2, replace=False)
        return json.dumps({"source_id": ids[int(s)], "target_id": ids[int(t)]})
    if not ids:
        return ""
    return json.dumps({ref["output_keys"][0]: ids[int(rng.integers(len(ids)))]})


def baseline_predictions(rows: list[dict], name: str, seed: int = DEFAULT_SEED) -> list[dict]:
    """Prediction dicts ``{"case_id", "output", "predictor"}`` of one gate baseline.

    Args:
        rows: config rows (``case_id``, ``instruction``, ``reference``).
        name: one of :data:`GATE_PREDICTORS`.
        seed: used by ``random`` only.

    Raises:
        ValueError: unknown baseline name.
    """
    if name == "random":
        return [{"case_id": r["case_id"], "output": random_output(r["case_id"], r["reference"], seed),
                 "predictor": name} for r in rows]
    if name not in BASELINE_FUNCTIONS:
        raise ValueError(f"unknown gate baseline {name!r}; expected one of {', '.join(GATE_PREDICTORS)}")
    fn = BASELINE_FUNCTIONS[name]
    return [{"case_id": r["case_id"], "output": fn(r["instruction"], r["reference"]), "predictor": name}
            for r in rows]
