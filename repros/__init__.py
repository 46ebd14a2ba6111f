"""repros: remember and replay.

The saved repro suite is one folder per bug under ``repros/suite/<name>/``: a
standalone ``repro.py`` (docs/design.md#the-script-contract: one verdict line;
exit 0 FIXED, 1 REPRODUCED, 2 SKIPPED, anything else ERROR), a ``manifest.toml``
saying what the bug is and what status to expect, and any small tensors it loads.

- ``repros.suite``  finds the folders, reads and validates their manifests (the format
  is documented there), and saves a ``trtmin reduce`` output folder into the suite
  (``add_repro``).
- ``repros.runner`` runs each script in its own subprocess, compares the status with
  the manifest's expectation (the "ok" rules are documented there), renders a rich
  table and builds the JSON record of a run.
- ``repros.table``  merges JSON records from several machines/releases into one
  markdown matrix (rows: bugs, columns: device / versions).

``pytest repros/`` runs the same suite as tests (``repros/conftest.py``), through the
same runner function. This package may import ``oracles``, never ``minimize``, and
never typer: ``minimize/cli.py`` wires these plain functions to the command line.
"""
