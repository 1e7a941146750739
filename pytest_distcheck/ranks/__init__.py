"""Run a function on every rank of a real process group, from inside a pytest test.

``RankGroup.run(fn)`` is the API tests see (through the ``dist_world`` fixture); ``RankPool`` keeps
the rank processes alive across tests; ``worker`` is the program each rank runs.
"""

DEFAULT_WORLD_SIZE = 2  # ranks of dist_world without a world_size marker or parameter
