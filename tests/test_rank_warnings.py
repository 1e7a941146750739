"""Warnings raised inside the ranks reach the test's warning machinery (pytest.warns, -W error::...)."""

from __future__ import annotations

import warnings

import pytest

from pytest_distcheck.ranks.errors import RankError


class LayoutWarning(UserWarning):
    """A warning class of this test module: pytest.warns must match it by identity."""


def _warn_on_each_rank(per_rank_text: bool):
    import warnings

    import torch.distributed as dist

    text = f"from rank {dist.get_rank()}" if per_rank_text else "same on every rank"
    for _ in range(3):  # one location, three times: shown once, as Python's default action does
        warnings.warn(text, UserWarning, stacklevel=1)
    return dist.get_rank()


def test_pytest_warns_sees_a_rank_warning_with_its_file_and_line(dist_world):
    with pytest.warns(UserWarning, match="same on every rank") as record:
        assert dist_world.run(_warn_on_each_rank, False) == [0, 1]
    mine = [w for w in record if "same on every rank" in str(w.message)]
    assert len(mine) == 1  # 2 ranks x 3 times, one location and text: issued once
    assert mine[0].filename == __file__
    assert mine[0].lineno == _warn_on_each_rank.__code__.co_firstlineno + 7


def test_different_messages_of_the_ranks_each_arrive(dist_world):
    with pytest.warns(UserWarning) as record:
        dist_world.run(_warn_on_each_rank, True)
    assert sorted(str(w.message) for w in record if "from rank" in str(w.message)) == [
        "from rank 0", "from rank 1"]


def test_a_warning_class_of_the_test_module_keeps_its_identity(dist_world):
    def body():
        import warnings

        warnings.warn("heads not contiguous", LayoutWarning, stacklevel=1)

    with pytest.warns(LayoutWarning, match="heads not contiguous"):
        dist_world.run(body)


def test_the_rank_filters_do_not_hide_a_deprecation_warning_from_the_test(dist_world):
    # The ranks' default filters ignore DeprecationWarning outside __main__; the test's decide.
    def body():
        import warnings

        warnings.warn("old API", DeprecationWarning, stacklevel=1)

    with pytest.warns(DeprecationWarning, match="old API"):
        dist_world.run(body)


def test_a_filter_set_by_rank_code_still_applies_inside_the_rank(dist_world):
    def body():
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            warnings.warn("silenced on purpose", stacklevel=1)
        return True

    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        assert dist_world.run(body) == [True, True]
    assert not [w for w in log if "silenced on purpose" in str(w.message)]


def test_torchs_silently_incorrect_autograd_warning_reaches_the_test(dist_world):
    # The warning of the issue: a custom op without an autograd kernel, backpropagated through.
    def body():
        import torch

        lib = torch.library.Library("distcheck_warn_demo", "FRAGMENT")
        lib.define("scale(Tensor x) -> Tensor")
        lib.impl("scale", lambda x: x * 2, "CPU")
        x = torch.ones(3, requires_grad=True)
        torch.ops.distcheck_warn_demo.scale(x).sum().backward()

    with pytest.warns(UserWarning, match="autograd kernel was not registered"):
        dist_world.run(body)


def test_a_failed_call_shows_its_warnings_with_the_error(dist_world):
    def body():
        import warnings

        warnings.warn("seen before the failure", stacklevel=1)
        raise ValueError("boom")

    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        with pytest.raises(RankError, match="ValueError: boom") as err:
            dist_world.run(body)
    assert "UserWarning: seen before the failure" in str(err.value)
    assert not [w for w in log if "seen before the failure" in str(w.message)]


def test_dash_w_error_fails_a_test_whose_ranks_warn(pytester):
    pytester.makepyfile(
        """
        def test_warns(dist_world):
            def body():
                import warnings
                warnings.warn("rank-side trouble", UserWarning, stacklevel=1)
                return 1
            assert dist_world.run(body) == [1, 1]

        def test_quiet(dist_world):
            assert dist_world.run(lambda: 2) == [2, 2]
        """
    )
    result = pytester.runpytest_subprocess("-W", "error::UserWarning", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*UserWarning: rank-side trouble*"])
