"""The legacy bridge (docs/specification.md §8; paper §6.5, A.14-A.15; issue 6).

Legacy executable-SVG binding records (task types object, endpoint, edge, group) with a
cached model output are converted into ExBind records (suite ``legacy``, format ``svg``,
family ``legacy``, condition = task type) and their cached outputs are scored in the stage
vocabulary without rerunning inference. The shipped ``legacy_bridge`` config is built from
real material nobody on this project wrote: the Graphviz example gallery (Debian
``graphviz-doc``, EPL-1.0) rendered by ``dot -Tsvg``, with 300 tasks derived from the SVG
structure and cached outputs of one real BM25 run.

Modules: :mod:`generator.legacy.gallery` (SVG structure, painted pixel boxes, the shipped SVGs),
:mod:`generator.legacy.tasks` (task derivation and seeded selection; the cached BM25 run is :mod:`predictors.legacy_cache`),
:mod:`generator.legacy.reader` (format validation),
:mod:`generator.legacy.converter` (eligibility gate, ExBind records, scores; re-exports the reader's names),
:mod:`generator.legacy.bridge` (lead-facing API: :func:`generator.legacy.bridge.bridge_records`,
:func:`generator.legacy.bridge.stage_profile`, :func:`generator.legacy.bridge.format_stage_profile`).

Legacy record format (JSONL, one object per line; blank lines are skipped)
--------------------------------------------------------------------------

=====================  ======  ===========================================================
field                  type    meaning
=====================  ======  ===========================================================
``id``                 string  unique record id (the ExBind ``latent_id``; case id ``<id>__svg``)
``source``             string  where the material comes from (file, gallery, origin)
``task_type``          string  ``object`` | ``endpoint`` | ``edge`` | ``group``
``instruction``        string  what the model was asked (never an element id)
``svg``                string  the SVG document text (a ``dot -Tsvg`` rendering), or instead
``svg_file``           string  a path, relative to the JSONL file, of that SVG (exactly one of the two)
``candidate_ids``      list    element ids (``<g id=..>`` of class node, edge or cluster), released order
``gold``               object  ``{"target_id": "<element id>"}``; must be among ``candidate_ids``
``target``             object  optional for object and edge, required for endpoint and group:
                               ``{"node": X}`` (object, group), ``{"edge": [A, B]}`` (edge),
                               ``{"edge": [A, B], "endpoint": "source" | "target"}``
                               (endpoint); X, A, B are node titles (dot node names)
``cached_output``      string  the raw model output, scored as it is (any text)
``output_provenance``  object  at least ``{"predictor": name}``; plus versions, date,
                               prompt hash, decoding, ... (kept verbatim as JSON)
=====================  ======  ===========================================================

A malformed line raises :class:`generator.legacy.converter.LegacyRecordError` naming the line and the
field (``records.jsonl:7: field `gold`: target_id 'edge9' is not among candidate_ids``).
A well-formed record that fails the eligibility gate (candidates present as SVG elements,
unique gold under the latent executor, gold equal to the SVG-derived target) is left out
and counted by reason in the gate counts, with its line and id.

Stage vocabulary (``exbind_scoring.DECLARED_ORDERS["legacy"]`` = candidate_valid, identity,
hierarchy, relation, role, exact): object -> identity; endpoint -> identity + role (ordered
source/target); edge -> identity + relation + role; group -> identity + hierarchy. The rules
are in :func:`exbind_scoring.stage_scores`.
"""
