"""Reports: the build's printed report (:mod:`reports.report`), the ``score`` command's
paper-style tables (:mod:`reports.score_report`) and figures (:mod:`reports.plots`)."""
