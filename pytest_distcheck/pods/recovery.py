"""First thing at a session's start (and in ``distcheck pods --sweep``): end the pods the ledger says may
still be billing, and give each its row.

Of the ledger's unsettled runs on this provider with a ``terminate-failed`` row or whose process is gone:
a pod named by a row is terminated until confirmed (without that row, only when the sweep's rules call
it an orphan); a pod created by a process killed before its ``started`` row is found by its name
(:mod:`~pytest_distcheck.pods.names`), recorded (``BudgetGuard.adopt_pod``) and terminated. Then the
provider's bill for those pods is appended (``BudgetGuard.reconcile``); without one, the worst case counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_distcheck.budget import accounting
from pytest_distcheck.errors import DistcheckError
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.pods import names
from pytest_distcheck.pods.base import PodInfo, Provider, ProviderError
from pytest_distcheck.pods.reaper import outcome, terminate_and_confirm
from pytest_distcheck.pods.sweep import orphan_reason

RETRIED = N_("pod {pod} of run {run} ({why}): {outcome}")
ADOPTED = N_("pod {pod} of run {run} was created but never recorded (its process died first): its started row is "
             "now line {line}")
NOT_ADOPTED = N_("pod {pod} of run {run} could not be recorded ({error})")
UNSETTLED = N_("unsettled")
NOT_CHECKED = N_("not checked ({error}); run `distcheck pods --sweep` later")
FAILED_EARLIER = N_("terminate failed earlier, may be billing")
PROCESS_GONE = N_("its process is gone")
NOT_LISTED = N_("run {run} has no pod recorded and the pods could not be listed ({error})")
BILL_NOT_READ = N_("the bill of pods {pods} was not read ({error}); `distcheck budget --reconcile` later")
RECONCILED = N_("reconciled {finding}")


@dataclass
class Recovery:
    """What :func:`recover` did: one line per pod, and the pods it could not confirm ended."""

    lines: list[str] = field(default_factory=list)
    unconfirmed: list[str] = field(default_factory=list)


def recover(guard, provider: Provider, confirm_timeout: float, pods: list[PodInfo] | None = None) -> Recovery:
    """End and record the ledger's pods that may still be billing (see the module docstring).

    Args:
        guard: the workspace's :class:`~pytest_distcheck.budget.guard.BudgetGuard`.
        pods: the account's live pods, if already listed (else listed here when a run has no pod row).

    Raises:
        LedgerError: the ledger does not parse (nothing is done). Provider failures are reported in the
        lines, never raised.
    """
    out = Recovery()
    status = guard.status()
    runs = [ch for ch in accounting.charges(status.rows) if ch.rows[0].provider == provider.name
            and (ch.terminate_failed or ch.run_id in status.abandoned)]
    runs.sort(key=lambda ch: not ch.terminate_failed)  # the ones known to have failed first
    touched: list[str] = []
    for ch in runs:
        pod_id = ch.pod_row.resource_id if ch.pod_row.has_pod else None
        if pod_id is None:
            found = _named_for(ch.run_id, provider, pods, out)
            if found is None:
                continue
            try:
                row = guard.adopt_pod(ch.run_id, found.id, found.usd_per_hour)[0]
            except DistcheckError as exc:
                out.lines.append(_(NOT_ADOPTED).format(pod=found.id, run=ch.run_id, error=exc))
            else:
                out.lines.append(_(ADOPTED).format(pod=found.id, run=ch.run_id, line=row.line))
            pod_id = found.id
        else:
            try:
                info = provider.status(pod_id)
            except ProviderError as exc:
                out.lines.append(_(RETRIED).format(pod=pod_id, run=ch.run_id, why=_(UNSETTLED),
                                                   outcome=_(NOT_CHECKED).format(error=exc)))
                out.unconfirmed.append(pod_id)
                continue
            if info.ended:
                touched.append(pod_id)
                continue
            kill, why = (True, _(FAILED_EARLIER)) if ch.terminate_failed else orphan_reason(info, "manual")
            if not kill:
                continue
        term = terminate_and_confirm(provider, pod_id, confirm_timeout)
        why = _(FAILED_EARLIER if ch.terminate_failed else PROCESS_GONE)
        out.lines.append(_(RETRIED).format(pod=pod_id, run=ch.run_id, why=why, outcome=outcome(term)))
        (touched if term.confirmed else out.unconfirmed).append(pod_id)
    if touched:
        out.lines += _reconcile(guard, provider, touched)
    return out


def _named_for(run_id: str, provider: Provider, pods: list[PodInfo] | None, out: Recovery) -> PodInfo | None:
    """The live pod whose name says it belongs to ``run_id``, when the sweep's rules let it be ended."""
    if pods is None:
        try:
            pods = provider.list()
        except ProviderError as exc:
            out.lines.append(_(NOT_LISTED).format(run=run_id, error=exc))
            return None
    for info in pods:
        parsed = names.parse(info.name)
        if parsed is not None and parsed.run_id == run_id and not info.ended and orphan_reason(info, "manual")[0]:
            return info
    return None


def _reconcile(guard, provider: Provider, pod_ids: list[str]) -> list[str]:
    """Append the provider's bill for ``pod_ids``; lines for those it billed."""
    def fetch(ids: list[str]) -> dict:
        bills = {}
        for pod_id in (i for i in ids if i in pod_ids):
            bill = provider.billed(pod_id)
            if bill is not None:
                bills[pod_id] = bill
        return bills

    try:
        findings = guard.reconcile(fetch, provider.name)
    except (DistcheckError, ProviderError) as exc:
        return [_(BILL_NOT_READ).format(pods=", ".join(pod_ids), error=exc)]
    return [_(RECONCILED).format(finding=f.line()) for f in findings
            if f.pod_id in pod_ids and f.provider_usd is not None]

