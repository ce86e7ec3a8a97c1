"""Graph latent family: named components joined by directed labelled edges (docs/specification.md §3-4; paper §3).

A latent graph instance is G = (V, E, A, Y): 6-9 nodes with distinct component names (A),
directed labelled edges (E), and the target Y = one edge ``source -[label]-> target``.
The instruction names both endpoints and the edge meaning and asks for the source then the
target; the answer is the ordered endpoint pair (graph declared order: identity, relation,
role, exact). In every odd slot (``slot % target_first_every == target_first_every - 1``)
the instruction mentions the target node before the source node (``target_first``), so the
order of mention does not give the endpoint order (a first-mention lexical baseline solves
only the source-first half).

Decoys (by construction):
- reversed edge: the edge ``target -> source`` exists with a *different* label unless
  ``slot % reverse_absent_every == reverse_absent_every - 1`` (so in 4 of 5 cases);
- same-label edge: at least one other edge touching the source or the target carries the
  instructed label, so the label alone does not identify the pair;
- every node has the same total degree (``degree`` in ``generator/data/graph.json``), so
  every node id occurs equally often in the serialized observation (1 node line plus
  ``degree`` edge lines) and no id is marked by frequency (docs/specification.md §7 target-id leakage).
At most one edge per ordered pair; no self-loops.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

_DATA_PATH = Path(__file__).resolve().parent.parent / "data" / "graph.json"
_MAX_WIRING_ATTEMPTS = 2000


@lru_cache(maxsize=1)
def load_data() -> dict:
    """The graph family data (node names, edge labels, sizes, instruction templates)."""
    with open(_DATA_PATH, encoding="utf-8") as handle:
        return json.load(handle)


@dataclass(frozen=True)
class GraphLatent:
    """One latent directed graph with a target edge.

    Attributes:
        latent_id: the instance id; node entities are ``f"{latent_id}_node{k}"``.
        names: node names, ``names[k]`` for node ``k`` (distinct).
        edges: ``(source_index, target_index, label)`` triples, sorted; at most one per
            ordered pair.
        source: index of the target edge's source node.
        target: index of the target edge's target node.
        label: the target edge's label (e.g. ``"reads from"``).
        target_first: phrasing hint: the instruction mentions the target node before the
            source node (a ``target_first`` template). Not latent content (left out of
            :meth:`canonical`).
    """

    latent_id: str
    names: tuple[str, ...]
    edges: tuple[tuple[int, int, str], ...]
    source: int
    target: int
    label: str
    target_first: bool = False

    def node_entity(self, k: int) -> str:
        """Latent entity id (also the semantic id) of node ``k``."""
        return f"{self.latent_id}_node{k}"

    @property
    def has_reverse(self) -> bool:
        """Whether the reversed edge ``target -> source`` exists (with another label)."""
        return any(s == self.target and t == self.source for s, t, _ in self.edges)

    def degrees(self) -> list[int]:
        """Total (in + out) degree of every node, indexed by node."""
        out = [0] * len(self.names)
        for s, t, _ in self.edges:
            out[s] += 1
            out[t] += 1
        return out

    def canonical(self) -> dict:
        """JSON-serializable content (no latent id, no surface ids) for latent hashing."""
        return {
            "family": "graph",
            "names": list(self.names),
            "edges": [[s, t, label] for s, t, label in self.edges],
            "source": self.source,
            "target": self.target,
            "label": self.label,
        }  # target_first is a phrasing choice, not latent content


def _wire(rng: random.Random, n: int, degree: int, fixed: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Directed edges giving every node total degree ``degree``, containing ``fixed``.

    Configuration-model pairing of the remaining edge stubs with rejection of self-loops,
    repeated ordered pairs and any further edge on the fixed (target) node pair.

    Raises:
        RuntimeError: when no valid wiring is found in the attempt budget (not observed
            for 6-9 nodes at degree 4).
    """
    deg = [0] * n
    for s, t in fixed:
        deg[s] += 1
        deg[t] += 1
    reserved = {frozenset(pair) for pair in fixed}
    stubs = [k for k in range(n) for _ in range(degree - deg[k])]
    if len(stubs) % 2:
        raise ValueError(f"n={n}, degree={degree}: odd number of free stubs")
    for _ in range(_MAX_WIRING_ATTEMPTS):
        rng.shuffle(stubs)
        used = set(fixed)
        ok = True
        for u, v in zip(stubs[::2], stubs[1::2]):
            if u == v or frozenset((u, v)) in reserved:
                ok = False
                break
            options = [p for p in ((u, v), (v, u)) if p not in used]
            if not options:
                ok = False
                break
            used.add(options[rng.randrange(len(options))])
        if ok:
            return sorted(used)
    raise RuntimeError(f"no {degree}-regular wiring found for n={n}")


def sample(rng: random.Random, latent_id: str, condition: Optional[str], slot: int) -> GraphLatent:
    """Sample one graph latent (broad suite only).

    Args:
        rng: the case's own RNG (the only randomness used).
        latent_id: instance id (prefix of every semantic id).
        condition: must be None (the graph family has no targeted conditions).
        slot: index of the case in its cell (>= 0); the reversed-edge decoy is left out
            when ``slot % reverse_absent_every == reverse_absent_every - 1``, and the
            instruction mentions the target first (``target_first``) when
            ``slot % target_first_every == target_first_every - 1`` (every odd slot).

    Returns:
        A :class:`GraphLatent` with 6-9 nodes, ``degree * n / 2`` edges and a target edge
        that exactly one ordered node pair realizes. ``target_first`` depends on the slot
        only (no RNG draw), so the draws are those of a source-first case.

    Raises:
        ValueError: condition not None or negative slot.
    """
    if condition is not None:
        raise ValueError(f"the graph family is broad-only; got condition {condition!r}")
    if slot < 0:
        raise ValueError(f"slot must be >= 0, got {slot}")
    data = load_data()
    labels: list[str] = data["edge_labels"]
    degree: int = data["degree"]
    period: int = data["reverse_absent_every"]
    order_period: int = data["target_first_every"]

    n = rng.randint(data["n_nodes"]["min"], data["n_nodes"]["max"])
    names = tuple(rng.sample(data["node_names"], n))
    source, target = rng.sample(range(n), 2)
    label = rng.choice(labels)
    fixed = [(source, target)]
    if slot % period != period - 1:
        fixed.append((target, source))

    pairs = _wire(rng, n, degree, fixed)
    edge_labels: dict[tuple[int, int], str] = {}
    for pair in pairs:  # sorted, so label draws are deterministic
        if pair == (source, target):
            edge_labels[pair] = label
        elif pair == (target, source):
            edge_labels[pair] = rng.choice([x for x in labels if x != label])
        else:
            edge_labels[pair] = rng.choice(labels)
    touching = [p for p in pairs if (source in p or target in p) and set(p) != {source, target}]
    if not any(edge_labels[p] == label for p in touching):
        edge_labels[touching[rng.randrange(len(touching))]] = label

    return GraphLatent(
        latent_id=latent_id,
        names=names,
        edges=tuple((s, t, edge_labels[(s, t)]) for s, t in pairs),
        source=source,
        target=target,
        label=label,
        target_first=slot % order_period == order_period - 1,
    )
