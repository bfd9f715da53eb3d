"""The papers' supervised claims at the papers' settings: the table's rows (``rows``), the suite
that runs them (``suite``), the tables (``aggregate``) and the analyses of the saved models.

The rows that are ablations or curricula, not a paper's setting, have their presets here, in
``conf/preset/`` (see ``experiments/README.md``)."""
