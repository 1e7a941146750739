"""Data files shipped with the kit (price table)."""
