"""Case construction: typed records (:mod:`generator.schema`, :mod:`generator.records`),
latent families, surface compilers, rendering, the prompt builder, the gates and their
baselines, the visible oracle, and the legacy converter (:mod:`generator.legacy`) as one
more source of records. Imports only the evaluator below it."""
