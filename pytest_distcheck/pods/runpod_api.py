"""Calls into the runpod SDK (pinned ==1.12.0) with the kit's own rules around them.

:func:`sdk` sets ``runpod.api_key`` from ``RUNPOD_API_KEY`` (the SDK never reads it); :func:`check_value`
rejects a double quote, backslash or line break before anything is sent (the SDK pastes values into the
GraphQL text unescaped); :func:`call` gives each call its own time limit and turns every SDK error,
timeout and lost connection into :class:`~pytest_distcheck.pods.base.ProviderError`, whose text never
contains the API key. Which SDK behaviour each rule answers: docs/design/pods.md.
"""

from __future__ import annotations

import os
import queue
import re
import threading
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.pods.base import NoCapacity, ProviderError, Unavailable

API_KEY_ENV = "RUNPOD_API_KEY"
SDK_VERSION = "1.12.0"
_UNSAFE = {'"': N_("a double quote"), "\\": N_("a backslash"), "\n": N_("a line break"),
           "\r": N_("a carriage return")}
_NO_CAPACITY = "no longer any instances available"  # RunPod's words, matched in its answer
NO_API_KEY = N_("{env} is not set: export your RunPod API key (runpod.io > Settings > API Keys) to run paid GPU tests "
                "on RunPod")
# The step that sets the key before {how}, a paid run's command: the DoD table's, and distcheck rehearse's last one.
NO_KEY_STEP = N_("export RUNPOD_API_KEY=<your RunPod API key> && {how}")
WRONG_SDK = N_("runpod SDK {installed} is installed; the kit is tested against {version} only "
               "(pip install 'runpod=={version}')")
UNSAFE_VALUE = N_("{field} contains {what}; the runpod SDK {version} puts values into GraphQL unescaped, so it would "
                  "corrupt the request. Use single quotes or drop it.")
NO_MACHINE_FREE = N_("RunPod has no machine free for this request ({message})")
ANSWERED_ERROR = N_("RunPod answered with an error: {message}")
KEY_REFUSED = N_("RunPod refused the API key in ${env} (HTTP 401)")
NOT_JSON = N_("RunPod answered with a body that is not JSON (an HTML error page such as 502 Bad Gateway?)")
NO_ANSWER = N_("no answer from RunPod ({error})")
ODD_SHAPE = N_("RunPod's answer had an unexpected shape ({error})")
NO_ANSWER_WITHIN = N_("no answer from RunPod within {seconds:g} s")
NOT_A_POD_ID = N_("pod id {pod!r} is not letters and digits")
BILLING_FAILED = N_("RunPod's billing answer for pod {pod} failed ({error})")


def api_key() -> str:
    """The key from ``$RUNPOD_API_KEY``. Raises Unavailable (a skip reason) when it is not set."""
    key = os.environ.get(API_KEY_ENV, "").strip()
    if not key:
        raise Unavailable(_(NO_API_KEY).format(env=API_KEY_ENV))
    return key


def redact(text: str) -> str:
    """``text`` with the API key (if set) replaced by ``***``."""
    key = os.environ.get(API_KEY_ENV, "").strip()
    return text.replace(key, "***") if key else text


def sdk() -> Any:
    """The runpod module with ``runpod.api_key`` set from the environment. Raises Unavailable (no key, the gpu
    extra not installed, another SDK version)."""
    key = api_key()
    try:
        import runpod
    except ImportError:
        from pytest_distcheck.deps import extra_missing, missing_extra_message

        raise Unavailable(extra_missing("gpu") or missing_extra_message("gpu", ["runpod"])) from None

    if runpod.__version__ != SDK_VERSION:
        raise Unavailable(_(WRONG_SDK).format(installed=runpod.__version__, version=SDK_VERSION))
    runpod.api_key = key
    return runpod


def check_value(field: str, value: str) -> str:
    """``value`` if it is safe to paste into the SDK's GraphQL text. Raises ValueError naming the field."""
    for ch, what in _UNSAFE.items():
        if ch in value:
            raise ValueError(_(UNSAFE_VALUE).format(field=field, what=_(what), version=SDK_VERSION))
    return value


def _translate(operation: str, exc: BaseException) -> ProviderError:
    import requests
    import runpod

    if isinstance(exc, runpod.error.QueryError):
        message = exc.message or ""
        if _NO_CAPACITY in message.lower():
            return NoCapacity(operation, _(NO_MACHINE_FREE).format(message=message))
        # INTERNAL_SERVER_ERROR and other server-side failures: the call may have taken effect.
        return ProviderError(operation, _(ANSWERED_ERROR).format(message=message), ambiguous=True)
    if isinstance(exc, runpod.error.AuthenticationError):
        return ProviderError(operation, _(KEY_REFUSED).format(env=API_KEY_ENV))
    if isinstance(exc, requests.exceptions.JSONDecodeError):
        return ProviderError(operation, _(NOT_JSON), ambiguous=True)
    if isinstance(exc, requests.exceptions.RequestException):
        return ProviderError(operation, _(NO_ANSWER).format(error=type(exc).__name__), ambiguous=True)
    if isinstance(exc, (KeyError, TypeError, IndexError)):
        return ProviderError(operation, _(ODD_SHAPE).format(error=f"{type(exc).__name__}: {exc}"), ambiguous=True)
    return ProviderError(operation, f"{type(exc).__name__}: {exc}", ambiguous=True)


def call(operation: str, fn: Callable[..., Any], *args: Any, timeout: float, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` (an SDK function) within ``timeout`` seconds.

    Raises:
        NoCapacity: RunPod has no machine for the request.
        ProviderError: any other failure; ``ambiguous`` when the call may have taken effect. The text
            names ``operation`` and never the API key. A call that times out keeps running on its daemon
            thread until the SDK's own 30 s limit; its result is dropped.
        ValueError: raised by ``fn`` for bad arguments (e.g. the SDK's unknown-GPU check).
    """
    box: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)

    def target() -> None:
        try:
            box.put((True, fn(*args, **kwargs)))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box.put((False, exc))

    threading.Thread(target=target, name=f"runpod-{operation}", daemon=True).start()
    try:
        ok, value = box.get(timeout=timeout)
    except queue.Empty:
        raise ProviderError(operation, _(NO_ANSWER_WITHIN).format(seconds=timeout), ambiguous=True) from None
    if ok:
        return value
    if isinstance(value, ValueError) and not _is_json_error(value):
        raise ValueError(redact(str(value))) from None
    err = _translate(operation, value)
    err.args = (redact(str(err)),)
    raise err from None


def _is_json_error(exc: BaseException) -> bool:
    import requests

    return isinstance(exc, requests.exceptions.JSONDecodeError)


REST_URL_ENV = "DISTCHECK_RUNPOD_REST_URL"
REST_URL = "https://rest.runpod.io/v1"
_POD_ID = re.compile(r"^[A-Za-z0-9]{1,64}$")


def pod_bills(pod_ids: list[str], timeout: float = 30.0) -> dict[str, tuple[Decimal, float]]:
    """What RunPod billed for each pod: pod id -> (USD, billed seconds), summed over its billing records.

    Source: RunPod REST API v1 ``GET /billing/pods?podId=...&grouping=podId`` (docs.runpod.io
    api-reference/billing/GET/billing/pods): records of ``amount`` (USD) and ``timeBilledMs``. The SDK
    1.12.0 has no billing call, so this is a plain HTTPS GET with the same key (``Authorization: Bearer``).
    Pods with no record are left out (the provider may not have billed them yet: it debits every 5
    minutes). ``$DISTCHECK_RUNPOD_REST_URL`` points it elsewhere (the tests' fake).

    Raises:
        Unavailable: no key. ProviderError: HTTP or JSON failure (text without the key).
        ValueError: a pod id that is not letters and digits (it goes into the URL).
    """
    import requests

    key = api_key()
    base = os.environ.get(REST_URL_ENV, REST_URL).rstrip("/")
    out: dict[str, tuple[Decimal, float]] = {}
    for pod_id in pod_ids:
        if not _POD_ID.match(pod_id):
            raise ValueError(_(NOT_A_POD_ID).format(pod=pod_id))
        try:
            resp = requests.get(f"{base}/billing/pods", params={"podId": pod_id, "grouping": "podId",
                                                                 "bucketSize": "day"},
                                headers={"Authorization": f"Bearer {key}"}, timeout=timeout)
            resp.raise_for_status()
            records = resp.json()
            usd = sum((Decimal(str(r["amount"])) for r in records if r.get("podId") == pod_id), Decimal(0))
            ms = sum(float(r.get("timeBilledMs") or 0) for r in records if r.get("podId") == pod_id)
        except (requests.RequestException, ValueError, KeyError, TypeError) as exc:
            # Redacted before it is cut short: a cut through the key would leave part of it.
            raise ProviderError("billing", redact(_(BILLING_FAILED).format(
                pod=pod_id, error=f"{type(exc).__name__}: {exc}"))[:300]) from None
        if any(r.get("podId") == pod_id for r in records):
            out[pod_id] = (usd, ms / 1000.0)
    return out
