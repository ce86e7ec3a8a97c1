"""The ``datasets`` builder of ExBind: every configuration as a ``test`` split, generated
in this process (``datasets`` 4+ no longer runs dataset scripts, so it is used from Python
and by tests, not through a script path)::

    from exbind import ExBind
    builder = ExBind(config_name="targeted_table", cache_dir=tmp)
    builder.download_and_prepare()
    ds = builder.as_dataset(split="test")

The released data is the export (``python exbind.py build``); this builder produces the same
rows from the generator.
"""

from __future__ import annotations

import datasets
from tqdm.auto import tqdm

from composition.release import CONFIGS, RELEASE_VERSION, Release, build_release
from generator.records import FEATURES, GENERATOR_VERSION
from publishing.export import DESCRIPTIONS, config_description

_RELEASE_CACHE: dict[str, Release] = {}


def release(processes: int | None = None, show_progress: bool = False, legacy_path: str | None = None,
            seed: int | None = None, scale: int = 1) -> Release:
    """The release of this generator version (and legacy JSONL), generated and gated once per process.

    ``seed`` / ``scale`` make a labelled variant release (:func:`composition.release.build_release`).
    """
    key = (GENERATOR_VERSION, legacy_path, seed, scale)
    if key not in _RELEASE_CACHE:
        with tqdm(desc="generate + gate latents", disable=not show_progress) as bar:
            _RELEASE_CACHE[key] = build_release(processes, progress=bar, legacy_path=legacy_path, seed=seed,
                                                scale=scale)
    return _RELEASE_CACHE[key]


class ExBindConfig(datasets.BuilderConfig):
    """One ExBind configuration (a name of :data:`composition.release.CONFIGS`)."""


class ExBind(datasets.GeneratorBasedBuilder):
    """ExBind executable-correspondence benchmark builder (docs/specification.md §2, §6).

    Every config has one ``test`` split with the features of
    :data:`generator.records.FEATURES`. Build in a fresh ``cache_dir`` (the export does):
    a builder without a content hash reuses its Arrow cache across code changes.
    """

    VERSION = datasets.Version(RELEASE_VERSION)
    BUILDER_CONFIGS = [ExBindConfig(name=name, version=datasets.Version(RELEASE_VERSION), description=DESCRIPTIONS[name])
                       for name in CONFIGS]
    DEFAULT_CONFIG_NAME = "broad"
    # The release the builder reads; None: the default release (:func:`release`).
    active_release: Release | None = None

    def _info(self) -> datasets.DatasetInfo:
        rel = type(self).active_release
        description = config_description(self.config.name, rel) if rel is not None else DESCRIPTIONS[self.config.name]
        return datasets.DatasetInfo(description=description, features=FEATURES, license="cc-by-4.0")

    def _split_generators(self, dl_manager):
        return [datasets.SplitGenerator(name=datasets.Split.TEST)]

    def _generate_examples(self):
        rel = type(self).active_release or release()
        for index, record in enumerate(rel.configs[self.config.name]):
            yield index, record.to_row()


__all__ = ["ExBind", "ExBindConfig", "release"]
