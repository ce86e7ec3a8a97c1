"""Opaque surface ids drawn from a case's own seeded RNG (docs/specification.md §11: ids never carry answers)."""

from __future__ import annotations

import random

_HEX = "0123456789abcdef"


def opaque_ids(rng: random.Random, prefix: str, n: int, width: int = 4) -> list[str]:
    """Return ``n`` distinct ids ``f"{prefix}_{hex}"`` drawn from ``rng``.

    Args:
        rng: the case's own ``random.Random`` (never the global state).
        prefix: short format prefix such as ``"e"`` (svg) or ``"n"`` (tree).
        n: how many ids; at most ``16**width``.
        width: hex digits per id.

    Raises:
        ValueError: when ``n`` exceeds the id space.
    """
    if n > 16**width:
        raise ValueError(f"n={n} ids do not fit in {width} hex digits; raise width")
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < n:
        token = "".join(rng.choice(_HEX) for _ in range(width))
        if token not in seen:
            seen.add(token)
            out.append(f"{prefix}_{token}")
    return out
