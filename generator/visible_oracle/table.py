"""Visible-oracle solver for the table family (see :mod:`generator.visible_oracle`)."""

from __future__ import annotations


def solve(view: dict, image) -> dict | None:
    """Answer from the model-visible view only; None when undecidable."""
    raise NotImplementedError("table visible solver not written yet")
