"""Which calculators a quiz bank may name: ``MODULE.FUNCTION`` of a module in ``pytest_distcheck.calc``.

Only public functions defined in those modules that return a number; a bank cannot reach anything else.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from pytest_distcheck.calc import collectives, cost, flops, memory, pipeline, tp_traffic
from pytest_distcheck.i18n import N_, _

MODULES = {m.__name__.rsplit(".", 1)[1]: m for m in (pipeline, memory, collectives, tp_traffic, flops, cost)}
CALC_MODULES = tuple(MODULES)
NOT_MODULE_FUNCTION = N_("calculator {name!r} must be MODULE.FUNCTION with MODULE one of {modules}")
NO_FUNCTION = N_("calculator {name!r}: no public function {function!r} in {module}")
BAD_ARGUMENTS = N_("calculator {name}{signature}: {error}")
NOT_A_NUMBER = N_("calculator {name} returned {type}, not a number")


def resolve(name: str) -> Callable[..., float]:
    """The calculator function called ``name`` (e.g. ``"pipeline.bubble_ratio_over_ideal"``).

    Raises:
        ValueError: not ``MODULE.FUNCTION``, an unknown module, or no public function of that name
            defined in the module.
    """
    module_name, _dot, func_name = name.partition(".")
    if not func_name or module_name not in CALC_MODULES:
        raise ValueError(_(NOT_MODULE_FUNCTION).format(name=name, modules=", ".join(CALC_MODULES)))
    module = MODULES[module_name]
    fn = getattr(module, func_name, None)
    if (func_name.startswith("_") or not inspect.isfunction(fn)
            or fn.__module__ != module.__name__):
        raise ValueError(_(NO_FUNCTION).format(name=name, function=func_name,
                                               module=f"pytest_distcheck.calc.{module_name}"))
    return fn


def check_arguments(name: str, kwargs: dict[str, object]) -> None:
    """Raise ValueError naming the problem when ``kwargs`` cannot call calculator ``name``."""
    sig = inspect.signature(resolve(name))
    try:
        sig.bind(**kwargs)
    except TypeError as exc:
        raise ValueError(_(BAD_ARGUMENTS).format(name=name, signature=sig, error=exc)) from None


def compute(name: str, kwargs: dict[str, object]) -> float:
    """Call calculator ``name`` with ``kwargs``; the result must be a real number.

    Raises:
        ValueError: from the calculator (bad parameter values), or a non-numeric result.
    """
    result = resolve(name)(**kwargs)
    if isinstance(result, bool) or not isinstance(result, int | float):
        raise ValueError(_(NOT_A_NUMBER).format(name=name, type=type(result).__name__))
    return float(result)
