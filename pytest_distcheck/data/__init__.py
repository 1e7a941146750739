"""Data files shipped with the kit (price table, shipped DoD, fingerprints); build.py writes the latter two."""
