"""JSON Schemas shipped with the kit (read with importlib.resources)."""
