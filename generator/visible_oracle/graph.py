"""Visible-oracle solver for the graph family (see :mod:`generator.visible_oracle`)."""

from __future__ import annotations


def solve(view: dict, image) -> dict | None:
    """Answer from the model-visible view only; None when undecidable."""
    raise NotImplementedError("graph visible solver not written yet")
