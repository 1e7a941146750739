"""Kill path b: the pod's start command, which runs a dead-man switch that terminates its own pod.

The switch is a shell loop started in the background before the image's own start script
(``/start.sh`` on RunPod's images, which installs ``PUBLIC_KEY`` and starts sshd). Every
``every`` seconds it ends the pod when the reserved time is up (``deadline``, Unix seconds) or when
the client's heartbeat file ``~/distcheck/heartbeat`` (touched over SSH) is older than ``stale``
seconds; it keeps trying until it succeeds. It terminates with the pod's own credentials
(``RUNPOD_POD_ID``, the pod-scoped ``RUNPOD_API_KEY``): ``runpodctl remove pod`` (runpodctl 1.x,
GraphQL podTerminate), else ``runpodctl pod delete`` (2.x, REST), else a plain ``curl`` podTerminate.
Sources: RunPod docs pods/templates/environment-variables.mdx; runpodctl cmd/pod/removePod.go and
cmd/pod/delete.go (see /work/shared/notes/runpod.md section 2).

The script travels base64-encoded inside ``bash -c '...'`` so the ``dockerArgs`` value holds no
double quote, backslash or newline: the runpod SDK 1.12.0 pastes it into the GraphQL text unescaped.
"""

from __future__ import annotations

import base64

HEARTBEAT = "distcheck/heartbeat"  # relative to the pod's home folder, as SSH sessions see it
LOG = "distcheck/deadman.log"

_SCRIPT = r"""#!/bin/bash
# distcheck dead-man switch (kill path b). Ends this pod at the reserved deadline or when the
# client's heartbeat goes stale, with the pod's own key. Written by pytest-distcheck.
DEADLINE=__DEADLINE__
STALE=__STALE__
EVERY=__EVERY__
# The home SSH logins get (the heartbeat is touched there); Docker sets HOME, passwd is the fallback.
HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
mkdir -p "$HOME/distcheck"
HB="$HOME/__HEARTBEAT__"
LOG="$HOME/__LOG__"
touch "$HB"
terminate_self() {
  runpodctl remove pod "$RUNPOD_POD_ID" && return 0
  runpodctl pod delete "$RUNPOD_POD_ID" && return 0
  curl -fsS -X POST "${RUNPOD_API_BASE_URL:-https://api.runpod.io}/graphql" \
    -H "Content-Type: application/json" -H "Authorization: Bearer $RUNPOD_API_KEY" \
    -d "{\"query\": \"mutation { podTerminate(input: {podId: \\\"$RUNPOD_POD_ID\\\"}) }\"}"
}
(
  while true; do
    now=$(date +%s)
    beat=$(stat -c %Y "$HB" 2>/dev/null || echo 0)
    age=$((now - beat))
    if [ "$now" -ge "$DEADLINE" ] || [ "$age" -gt "$STALE" ]; then
      echo "$(date -u +%FT%TZ) ending pod $RUNPOD_POD_ID: now=$now deadline=$DEADLINE heartbeat age=${age}s" >> "$LOG"
      terminate_self >> "$LOG" 2>&1
    fi
    sleep "$EVERY"
  done
) &
if [ -x /start.sh ]; then exec /start.sh; fi
exec sleep infinity
"""


def script(deadline_epoch: float, stale_s: float, every_s: float) -> str:
    """The switch's shell script (also the documentation of exactly what runs on the pod)."""
    return (_SCRIPT.replace("__DEADLINE__", str(int(deadline_epoch)))
            .replace("__STALE__", str(max(1, round(stale_s))))
            .replace("__EVERY__", f"{max(every_s, 0.1):g}")
            .replace("__HEARTBEAT__", HEARTBEAT).replace("__LOG__", LOG))


def start_command(deadline_epoch: float, stale_s: float, every_s: float) -> str:
    """The pod's start command (RunPod ``dockerArgs``): decode the switch into ~/distcheck and run it.

    Only letters, digits, ``+/=``, spaces and ``-'~/.&>|;`` appear in it, so it is safe in the SDK's
    unescaped GraphQL string and is shlex-split by RunPod into ``bash -c '<...>'``.
    """
    b64 = base64.b64encode(script(deadline_epoch, stale_s, every_s).encode()).decode()
    return (f"bash -c 'mkdir -p ~/distcheck && echo {b64} | base64 -d > ~/distcheck/deadman.sh "
            f"&& exec bash ~/distcheck/deadman.sh'")
