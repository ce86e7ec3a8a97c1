"""Publishing: the Hub-ready export (:mod:`publishing.export`), its dataset card and checks
(:mod:`publishing.card`) and the upload (:mod:`publishing.hub`)."""
