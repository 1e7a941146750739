"""A local fake of the RunPod GraphQL API (and of a pod's SSH side), for the kit's pods tests and for
``distcheck rehearse`` (which is why it ships in the package; its deps are in the ``gpu`` extra).

SYNTHETIC: everything it answers is made up in the shape of RunPod's API as the runpod SDK 1.12.0
sends and reads it; see /work/shared/notes/runpod.md for the facts it follows.
"""

from .server import FakeRunPod

__all__ = ["FakeRunPod"]
