"""The pod's own kill path: its start command, which runs a dead-man switch that terminates its own pod.

A shell loop, started before the image's own ``/start.sh``, ends the pod every ``every`` seconds once it
has lived ``limit_s`` seconds (or the fewer that ``budget_usd`` buys at the dearer of the pod's own
``costPerHr`` and the rate the client last metered, less ``margin_s``), or once the client's heartbeat
file ``~/distcheck/heartbeat`` has not changed for ``stale`` seconds. Time is the pod's ``/proc/uptime``;
the client sends durations, never a date. It keeps trying until terminated, with the pod's own
credentials (runpodctl 1.x or 2.x, else curl). The script travels base64-encoded: the runpod SDK pastes
``dockerArgs`` into GraphQL unescaped. Sources and details: docs/design/pods.md.
"""

from __future__ import annotations

import base64
import math

HEARTBEAT = "distcheck/heartbeat"  # relative to the pod's home folder, as SSH sessions see it
LOG = "distcheck/deadman.log"

_SCRIPT = r"""#!/bin/bash
# distcheck dead-man switch. Ends this pod when its reserved seconds are used (at the
# pod's own costPerHr or the client's metered rate, if dearer) or when the client's heartbeat stops.
# Written by pytest-distcheck.
LIMIT_S=__LIMIT_S__
BUDGET_USD=__BUDGET_USD__
MARGIN_S=__MARGIN_S__
STALE=__STALE__
EVERY=__EVERY__
API="${RUNPOD_API_BASE_URL:-https://api.runpod.io}/graphql"
# The home SSH logins get (the heartbeat is touched there); Docker sets HOME, passwd is the fallback.
HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
mkdir -p "$HOME/distcheck"
HB="$HOME/__HEARTBEAT__"
LOG="$HOME/__LOG__"
touch "$HB"
up() { cut -d' ' -f1 /proc/uptime | cut -d. -f1; }
gql() {
  curl -fsS -m 20 -X POST "$API" -H "Content-Type: application/json" -H "Authorization: Bearer $RUNPOD_API_KEY" \
    -d "{\"query\": \"$1\"}"
}
terminate_self() {
  runpodctl remove pod "$RUNPOD_POD_ID" && return 0
  runpodctl pod delete "$RUNPOD_POD_ID" && return 0
  gql "mutation { podTerminate(input: {podId: \\\"$RUNPOD_POD_ID\\\"}) }"
}
cost_per_hr() {
  gql "query { pod(input: {podId: \\\"$RUNPOD_POD_ID\\\"}) { costPerHr } }" 2>/dev/null \
    | sed -n 's/.*"costPerHr": *\([0-9][0-9.eE+-]*\).*/\1/p'
}
(
  T0=$(up)
  limit=$LIMIT_S
  seen=""
  changed=$T0
  asked=-100000
  lower() {  # lower the limit to what the budget buys at rate $1 (from $2), if that is sooner
    cap=$(awk -v b="$BUDGET_USD" -v r="$1" -v m="$MARGIN_S" 'BEGIN { if (r > 0) printf "%d", b * 3600 / r - m }')
    if [ -n "$cap" ] && [ "$cap" -lt "$limit" ]; then
      limit=$cap
      echo "$(date -u +%FT%TZ) $2 $1: $BUDGET_USD USD lasts ${cap}s, limit now ${limit}s" >> "$LOG"
    fi
  }
  while true; do
    now=$(up)
    if [ $((now - asked)) -ge 60 ]; then
      rate=$(cost_per_hr)
      if [ -n "$rate" ]; then
        asked=$now
        lower "$rate" costPerHr
      fi
    fi
    metered=$(head -c 40 "$HB" 2>/dev/null | tr -cd '0-9.')
    if [ -n "$metered" ]; then lower "$metered" "client meters"; fi
    mtime=$(stat -c %Y "$HB" 2>/dev/null || echo 0)
    if [ "$mtime" != "$seen" ]; then seen=$mtime; changed=$now; fi
    age=$((now - changed))
    lived=$((now - T0))
    if [ "$lived" -ge "$limit" ] || [ "$age" -gt "$STALE" ]; then
      echo "$(date -u +%FT%TZ) ending pod $RUNPOD_POD_ID: lived=${lived}s limit=${limit}s" \
        "heartbeat age=${age}s" >> "$LOG"
      terminate_self >> "$LOG" 2>&1
    fi
    sleep "$EVERY"
  done
) &
if [ -x /start.sh ]; then exec /start.sh; fi
exec sleep infinity
"""


def script(limit_s: float, budget_usd: float, margin_s: float, stale_s: float, every_s: float) -> str:
    """The switch's shell script (also the documentation of exactly what runs on the pod).

    Args:
        limit_s: seconds the pod may live after the switch starts (at the priced rate, margin taken).
        budget_usd: the reservation, USD: at the pod's own costPerHr it may buy fewer seconds.
        margin_s: taken off the seconds the budget buys (the client cuts this much earlier too).
        stale_s: heartbeat age that ends the pod; every_s: seconds between looks.
    """
    return (_SCRIPT.replace("__LIMIT_S__", str(max(1, int(limit_s))))
            .replace("__BUDGET_USD__", f"{float(budget_usd):.6f}")
            .replace("__MARGIN_S__", str(max(0, math.ceil(margin_s))))
            .replace("__STALE__", str(max(1, round(stale_s))))
            .replace("__EVERY__", f"{max(every_s, 0.1):g}")
            .replace("__HEARTBEAT__", HEARTBEAT).replace("__LOG__", LOG))


def start_command(limit_s: float, budget_usd: float, margin_s: float, stale_s: float, every_s: float) -> str:
    """The pod's start command (RunPod ``dockerArgs``): decode the switch into ~/distcheck and run it.

    Only letters, digits, ``+/=``, spaces and ``-'~/.&>|;`` appear in it, so it is safe in the SDK's
    unescaped GraphQL string and is shlex-split by RunPod into ``bash -c '<...>'``.
    """
    b64 = base64.b64encode(script(limit_s, budget_usd, margin_s, stale_s, every_s).encode()).decode()
    return (f"bash -c 'mkdir -p ~/distcheck && echo {b64} | base64 -d > ~/distcheck/deadman.sh "
            f"&& exec bash ~/distcheck/deadman.sh'")
