"""Release composition: which latents, seeds and surfaces make each config, the gates run
per suite, and the order / column-metadata controls (:mod:`composition.release`)."""
