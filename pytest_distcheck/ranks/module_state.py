"""Library state that a call leaves in the modules of a warm rank, and what a later call's error says of it.

megatron-core keeps its process groups in the globals of ``megatron.core.parallel_state``
(``initialize_model_parallel``). On ranks kept between calls those globals stay, but the groups they
name do not: after a call that made subgroups, the next call gets a fresh process group and every old
group is destroyed. :class:`StateWatch` remembers which test left the state initialised, so the error of
a later call (Megatron's own "... is already initialized", or a dead group) can name it and the fix.
"""

from __future__ import annotations

import sys

from pytest_distcheck.i18n import N_, _

# In the rank's language (given by the pool at start); {test} is a node id, or OUTSIDE_PYTEST.
MEGATRON_LEFT_INITIALISED = N_(
    "megatron.core.parallel_state was initialised by an earlier call on these ranks ({test}) and never destroyed: "
    "its process groups ended with that call (dist_world builds a fresh process group after a call that made "
    "subgroups, destroying the old ones), while the module's globals stay on these warm ranks. Initialise it in "
    "each call that uses it and destroy it before the call returns: parallel_state.destroy_model_parallel() in a "
    "finally: block (Megatron-LM's own tests do so in teardown); a layout cannot be kept for a whole test module "
    "here, as no group outlives the call that made it. @pytest.mark.fresh_ranks starts a test on new ranks.")
OUTSIDE_PYTEST = N_("a call outside pytest")


def megatron_initialised() -> bool:
    """Whether megatron-core's parallel state holds groups (only if the module was imported)."""
    ps = sys.modules.get("megatron.core.parallel_state")
    return ps is not None and any(getattr(ps, name, None) is not None for name in (
        "_MODEL_PARALLEL_GROUP", "_TENSOR_MODEL_PARALLEL_GROUP", "_DATA_PARALLEL_GROUP"))


class StateWatch:
    """Which test left library state initialised on this rank (:meth:`after_call`), and the note a later
    call's error gets (:meth:`note`)."""

    def __init__(self) -> None:
        self.megatron_by: str | None = None  # the test's node id ('' outside pytest)

    def after_call(self, test: str) -> None:
        """A call of ``test`` (pytest's node id, or '') returned: note whether it left the state set."""
        if not megatron_initialised():
            self.megatron_by = None
        elif self.megatron_by is None:
            self.megatron_by = test

    def note(self) -> str:
        """The note for an error in a call that started with state left by an earlier one, or ''."""
        if self.megatron_by is not None and megatron_initialised():
            return _(MEGATRON_LEFT_INITIALISED).format(test=self.megatron_by or _(OUTSIDE_PYTEST))
        return ""


def current_test() -> str:
    """The node id of the test running now (pytest's ``PYTEST_CURRENT_TEST``, which calls carry), or ''."""
    import os

    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
