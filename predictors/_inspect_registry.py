"""inspect-ai entry point (``[project.entry-points.inspect_ai] exbind = "predictors._inspect_registry"``):
importing it registers the ``exbind`` task for ``inspect eval exbind/exbind``."""

from predictors.inspect_task import exbind  # noqa: F401
