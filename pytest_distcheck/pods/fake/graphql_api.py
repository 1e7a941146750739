"""The GraphQL side of the fake: parse with graphql-core, answer the operations the SDK sends, faults.

Values are read with ``graphql.value_from_ast_untyped``, so a query the SDK built with an unescaped
quote fails here with the same "Syntax Error" a real GraphQL server gives. Answers are projected
through the query's selection set, so asking for a field the fake does not know is an error too.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import graphql

from .state import CATALOGUE, Account, FakePod

NO_CAPACITY = ("There are no longer any instances available with the requested specifications. "
               "Please refresh and try again.")
HTML_502 = b"<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1>" \
           b"</center><hr><center>cloudflare</center></body></html>\n"

# Short names tests use for the top-level fields.
OPS = {"create": "podFindAndDeployOnDemand", "get": "pod", "list": "myself", "terminate": "podTerminate",
       "stop": "podStop", "gpu": "gpuTypes", "billing": "billing"}
FAULT_KINDS = ("no_capacity", "http_502", "http_500", "timeout", "reply_lost")


@dataclass
class Reply:
    """What the HTTP layer sends: a status and body, or ``drop`` to close without answering."""

    status: int = 200
    body: Any = None  # dict (sent as JSON) or bytes (sent as text/html)
    drop: bool = False


class GraphQLError(Exception):
    def __init__(self, message: str, code: str = "RUNPOD", path: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.path = path


def _error(message: str, code: str = "RUNPOD", path: str | None = None) -> dict[str, Any]:
    err: dict[str, Any] = {"message": message, "extensions": {"code": code}}
    if path:
        err["path"] = [path]
    return err


def project(value: Any, selection: graphql.SelectionSetNode | None, type_name: str) -> Any:
    """Keep only the selected fields, recursively, as a GraphQL server does."""
    if selection is None or value is None:
        return value
    if isinstance(value, list):
        return [project(v, selection, type_name) for v in value]
    out = {}
    for node in selection.selections:
        if not isinstance(node, graphql.FieldNode):
            raise GraphQLError(f"fake: fragments are not supported (in {type_name})")
        name = node.name.value
        if name not in value:
            raise GraphQLError(f'Cannot query field "{name}" on type "{type_name}".', "GRAPHQL_VALIDATION_FAILED")
        out[node.alias.value if node.alias else name] = project(value[name], node.selection_set, name)
    return out


class Api:
    """Answers one GraphQL request body for the account; faults are queued per operation."""

    def __init__(self, account: Account, fake: Any) -> None:
        self.account = account
        self.fake = fake  # the FakeRunPod, for boot times and pod start/stop
        self.faults: dict[str, deque[str]] = {op: deque() for op in OPS.values()}
        self.log: list[tuple[str, dict[str, Any]]] = []  # (top-level field, arguments) of answered calls
        self.hang_seconds = 2.0

    def inject(self, op: str, kind: str, times: int = 1) -> None:
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r}; one of {FAULT_KINDS}")
        self.faults[OPS.get(op, op)].extend([kind] * times)

    def handle(self, body: dict[str, Any], bearer: str | None) -> Reply:
        try:
            doc = graphql.parse(body.get("query") or "")
        except graphql.GraphQLError as exc:
            return Reply(400, {"errors": [_error(exc.message, "GRAPHQL_PARSE_FAILED")]})
        ops = [d for d in doc.definitions if isinstance(d, graphql.OperationDefinitionNode)]
        if len(ops) != 1:
            return Reply(400, {"errors": [_error("fake: expected exactly one operation")]})
        fields = [s for s in ops[0].selection_set.selections if isinstance(s, graphql.FieldNode)]
        variables = body.get("variables") or {}
        scope = self._scope(bearer)
        if scope is None:
            return Reply(401, {"errors": [_error("Unauthorized", "UNAUTHENTICATED")]})
        data: dict[str, Any] = {}
        for field in fields:
            name = field.name.value
            args = {a.name.value: graphql.value_from_ast_untyped(a.value, variables) for a in field.arguments or ()}
            fault = self.faults.get(name) and self.faults[name].popleft()
            if fault == "no_capacity":
                return Reply(200, {"errors": [_error(NO_CAPACITY, path=name)], "data": {name: None}})
            if fault == "http_502":
                return Reply(502, HTML_502)
            if fault == "http_500":
                return Reply(500, {"errors": [_error("Something went wrong. Please try again later or contact "
                                                     "support.", "INTERNAL_SERVER_ERROR", name)]})
            if fault == "timeout":
                time.sleep(self.hang_seconds)
            try:
                self._authorize(scope, name, args)
                value = self._answer(name, args)
                data[field.alias.value if field.alias else name] = project(value, field.selection_set, name)
            except GraphQLError as exc:
                return Reply(200, {"errors": [_error(str(exc), exc.code, exc.path or name)], "data": {name: None}})
            self.log.append((name, args))
            if fault == "reply_lost":
                return Reply(drop=True)
        return Reply(200, {"data": data})

    # -- auth ---------------------------------------------------------------------------------
    def _scope(self, bearer: str | None) -> str | None:
        """'account', a pod id (pod-scoped key, as runpodctl inside a pod has), or None."""
        if bearer and bearer == self.account.api_key:
            return "account"
        with self.account.lock:
            for pod in self.account.pods.values():
                if bearer and bearer == pod.pod_key:
                    return pod.id
        return None

    def _authorize(self, scope: str, name: str, args: dict[str, Any]) -> None:
        if scope == "account":
            return
        if name in ("pod", "podTerminate", "podStop") and (args.get("input") or {}).get("podId") == scope:
            return
        raise GraphQLError("pod-scoped key may only act on its own pod", "FORBIDDEN")

    # -- operations ---------------------------------------------------------------------------
    def _pod(self, args: dict[str, Any]) -> FakePod | None:
        pod_id = (args.get("input") or {}).get("podId")
        with self.account.lock:
            return self.account.pods.get(pod_id)

    def _answer(self, name: str, args: dict[str, Any]) -> Any:
        acct = self.account
        if name == "gpuTypes":
            wanted = (args.get("input") or {}).get("id")
            return [self._gpu(gid) for gid in CATALOGUE if wanted is None or gid == wanted]
        if name == "podFindAndDeployOnDemand":
            inp = args.get("input") or {}
            for key in ("name", "imageName", "gpuTypeId"):
                if not inp.get(key):
                    raise GraphQLError(f"input.{key} is required", "BAD_USER_INPUT")
            if inp["gpuTypeId"] not in CATALOGUE:
                raise GraphQLError(NO_CAPACITY)
            pod = self.fake._create(inp)
            return {"id": pod.id, "imageName": pod.image, "env": [f"{k}={v}" for k, v in pod.env.items()],
                    "machineId": "m-" + pod.id, "machine": {"podHostId": pod.id + "-host"},
                    "desiredStatus": pod.desired_status, "costPerHr": pod.cost_per_hr, "name": pod.name}
        if name == "pod":
            pod = self._pod(args)
            if pod is None:
                raise GraphQLError("pod not found")
            with acct.lock:
                if not pod.alive and pod.hide_polls_left > 0:
                    pod.hide_polls_left -= 1
                    stale = acct.pod_json(pod)
                    stale["desiredStatus"] = "RUNNING"
                    return stale
            if not pod.alive:
                if self.fake.gone_as_error:
                    raise GraphQLError("pod not found")
                return None
            return acct.pod_json(pod)
        if name == "myself":
            return {"id": "user-fake", "pubKey": "", "networkVolumes": [],
                    "pods": [acct.pod_json(p) for p in acct.live()],
                    "clientBalance": 10.0, "currentSpendPerHr": sum(p.cost_per_hr for p in acct.live()),
                    "spendLimit": 80}
        if name == "podTerminate":
            pod = self._pod(args)
            if pod is None or not pod.alive:
                raise GraphQLError("pod not found")
            self.fake._terminate(pod, by="api")
            return None
        if name == "podStop":
            pod = self._pod(args)
            if pod is None or not pod.alive:
                raise GraphQLError("pod not found")
            pod.desired_status = "EXITED"
            pod.stopped_at = acct.clock.now()
            return {"id": pod.id, "desiredStatus": pod.desired_status}
        raise GraphQLError(f'Cannot query field "{name}" on type "Query".', "GRAPHQL_VALIDATION_FAILED")

    @staticmethod
    def _gpu(gid: str) -> dict[str, Any]:
        g = CATALOGUE[gid]
        return {
            "id": gid, "displayName": g["displayName"], "memoryInGb": g["memoryInGb"],
            "maxGpuCount": g["maxGpuCount"], "manufacturer": g["manufacturer"], "cudaCores": g["cudaCores"],
            "secureCloud": True, "communityCloud": True, "securePrice": g["securePrice"],
            "communityPrice": g["communityPrice"], "oneMonthPrice": None, "threeMonthPrice": None,
            "oneWeekPrice": None, "communitySpotPrice": None, "secureSpotPrice": None,
            "lowestPrice": {"minimumBidPrice": None, "uninterruptablePrice": g["communityPrice"]},
        }
