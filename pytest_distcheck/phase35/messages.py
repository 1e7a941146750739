"""The reasons Phase 35's DoD checks (``checks/test_*.py``) give the table, as catalog templates.

The check files are workspace files that the catalog's extraction does not read, so their messages live here
(marked ``N_``) and a check speaks one as ``_(CONSTANT).format(...)``; the tests import the same constants.
Placeholders name paths, ids, commands and figures, never prose; a count with its noun comes from one of the
functions at the end (``gpu_results(3)``: "3 GPU results"), whose singular and plural the catalog holds as one entry.
"""

from __future__ import annotations

from pytest_distcheck.i18n import N_, ngettext

# checks/test_ddp_allreduce_logged.py
NO_DDP_LOG = N_("no committed all-reduce log at {rel}")

# checks/test_reading_notes_cited.py
# The lab page is written out, so that the Spanish catalog names the Spanish page (docs/es/lab/), as
# diagram.skeleton.UNDRAWN does.
NO_NOTE = N_("no note at {paths}: write at least {n} design decisions (what, why, cost), each with a "
             "[cite: PACKAGE PATH::SYMBOL \"QUOTE\"] (how: docs/lab/03-megatron-fsdp-reading.md)")
NOTES_DONE = N_("evidence checked, confirmed: every citation resolved in the installed sources")

# checks/test_spend_within_budget.py
NOT_RECONCILED = N_("not reconciled with the provider (RUNPOD_API_KEY not set): amounts are self-reported")
RECONCILE_FAILED = N_("reconciliation with RunPod failed ({error}); amounts are self-reported")
NO_BUDGET_SECTION = N_("{path}: no [budget] section (expected ledger and phase_ceiling_usd)")
NO_LEDGER = N_("no spend ledger at {ledger} (it records every paid run, or that there was none)")
# {rows}, {runs}: budget.errors.rows(n), runs(n)
SPEND_SUMMARY = N_("{rows}, {runs}; total {total} of {ceiling}")
OVER_PHASE = N_("total {total} > phase ceiling {ceiling}")
OVER_EXPERIMENT = N_("{experiment} rows (lines {lines}) total {spent} > its ceiling {ceiling}")
OVERSPENT = N_("{ledger}: {over} (amounts recomputed from rate x billed seconds of each row; a reconciled run "
               "counts the provider's bill)")
SPEND_DONE = N_("evidence checked, {label}: {summary}")

# checks/test_tp_diagram_committed.py
PLAN_LAYER_MISSING = N_("{layer} missing (expected {style})")
PLAN_LAYER_CHANGED = N_("{layer} is {actual} (expected {style})")
NOT_THE_DOD_PLAN = N_("{plan} is not the TP plan the DoD fixes: {changes}")
NO_DIAGRAM_PAGE = N_("{page} not found: expected a page with a Mermaid flowchart of one block of {plan} on "
                     "{n} ranks")
DIAGRAM_DONE = N_("evidence checked, confirmed: the diagram matches the plan")

# checks/test_tp_speedup_gpu.py: the log a paid run (or its rehearsal) leaves in the summary
PAID_TITLE = N_("TP speedup on {gpus} GPUs")
PAID_WROTE = N_("run {run} on {provider} pod {pod} wrote {files}\npod preflight: {preflight}\ncommit them: git add "
                "{files} && git commit -m \"TP speedup results\"")
REHEARSAL_TITLE = N_("REHEARSAL of the paid TP run")
NO_TP_LAB = N_("{path} not found: the TP lab must be in the workspace")
FIXED_POD_ARGS = N_("[tp_inference] pod_args may not give {args}: the paid run sets the backend, device, preset, run "
                    "id and output name itself (a paid run never falls back to the CPU)")
OTHER_RUN_ID = N_("{name}: run_id {got!r}, expected {want!r}")
WRONG_DEVICE = N_("{name}: a {device}/{backend} result on {count} device(s), {ranks} ranks; this run must produce "
                  "{want_device}/{want_backend} on {gpus}. Nothing was copied: a paid run never yields a CPU result")
NOT_MARKED_REHEARSAL = N_("{name}: its preflight record does not say rehearsal={rehearsal}")
NEVER_OVERWRITTEN = N_("{path} exists already; results are never overwritten (this run's copy is left on the pod's "
                       "side only)")
# The status line's "running ..." for the experiment; {ranks}: ranks(n).
SPEEDUP_RUN = N_("speedup.py: torchrun, {ranks}, {backend} on {device}")
SPEEDUP_FAILED = N_("speedup.py on pod {pod} exited with {status}; last lines:\n{tail}")
REHEARSAL_WROTE = N_("run {run} on the fake RunPod pod {pod} (nothing paid) wrote {files} in the rehearsal's scratch "
                     "copy: not evidence, not to commit.\npod preflight: {preflight}; not covered here: {problems}")

# checks/test_tp_speedup_committed.py
NEEDS_RESULTS_DIR = N_("{path}: [tp_inference] needs results_dir")
NO_TP_RESULT = N_("no result in {dir}")
NO_GPU_RESULT = N_("no result produced on CUDA with >= 2 GPUs yet (found: {found})")
FOUND_RESULT = N_("{path} ({ranks} ranks on {count} x {device}, {backend})")
# {results}: gpu_results(n)
TP_DONE = N_("evidence checked, {labels}: {results} tied to their ledger rows by run id and pod")
TP_NOT_EVIDENCE = N_("{rel}: not evidence: {why}; a GPU result must come from your own paid run ({how})")
TP_IN_THE_FUTURE = N_("{rel}: dated in the future ({key} {when}); a result is stamped when it is measured")
TP_DEGREES = N_("{rel}: measures TP degrees {degrees}; expected at least 1 and 2")
TP_NO_SPEEDUP = N_("{rel}: no speedup at TP 2 (no batch size and prompt length measured at both TP 1 and TP 2)")
TP_MORE_PROBLEMS = N_(" (and {n} more)")
TP_NO_PLOT = N_("{rel}: plot {plot!r} not found at {png}")
TP_NOT_PNG = N_("{rel}: plot {png} is not a PNG file")
TP_NEEDS_BUDGET = N_("{path}: needs [budget] ledger and [budget.experiment_ceilings_usd] {experiment} to check the "
                     "run's cost")
TP_LEDGER_UNPARSED = N_("the ledger does not parse: {error}")
TP_NO_LEDGER_ROW = N_("{rel}: run_id {run!r} has no row in the ledger {ledger}; a paid result must come from a run "
                      "under the budget guard ({how})")
TP_FIXTURE_ROW = N_("{ledger} line {line}: run {run!r} is a row of the kit's own synthetic fixtures, never evidence "
                    "of a paid run")
TP_NO_POD = N_("{rel}: names no pod (provider, id), so it cannot be tied to the ledger rows of run {run!r}; results "
               "written by {how} record it")
TP_LOCAL_POD = N_("{rel}: ran on provider local, not a cloud pod; the item needs 2 cloud GPUs ({how})")
TP_OTHER_POD = N_("{rel}: ran on {provider} pod {pod!r}, but the ledger rows of run {run!r} name {named}")
TP_POD = N_("{provider} pod {pod!r}")
TP_OTHER_EXPERIMENT = N_("{ledger} line {line}: run {run!r} is counted against experiment {actual!r}, expected "
                         "{experiment!r}")
TP_OVER_CEILING = N_("{ledger} line {line}: run {run!r} cost ${cost}, above the {experiment} ceiling ${ceiling}")
TP_SUMMARY = N_("{label}: {rel}: {count} x {device} ({backend}), run {run} cost ${cost} of ${ceiling} ({settled}); "
                "best decode speedup {speedup}x at TP {tp}, batch {batch}, prompt {prompt}")

# checks/test_quiz_passed.py
PASS_MARK = N_("pass mark {mark}")
QUIZ_IN_THE_FUTURE = N_("{log} line {line}: dated in the future (finished {when}); `distcheck quiz` stamps each "
                        "attempt when it ends")
NOT_COUNTED_ONE = N_("line {line}: {why}")
NOT_COUNTED = N_("; {n} not counted ({attempts}{more})")
NO_GRADED_ATTEMPT = N_("no graded attempt in {log} yet (expected one scoring at least the {mark}){not_counted}")
# {attempts}: graded_attempts(n)
BELOW_PASS_MARK = N_("{attempts} in {log}; the best, line {line} (seed {seed}), re-grades to "
                     "{correct}/{total} ({score}), below the {mark}{not_counted}")
TOO_FAST = N_("; fast ({seconds} s for {total} items, under {minimum} s each): shown to a grader, not refused")
QUIZ_DONE = N_("evidence checked, self-reported: line {line} re-grades to {correct}/{total} ({score}){fast}")

SETTLED, OPEN = N_("settled"), N_("open")
AND = N_("and")

# The checks' log sections (title, then lines) under the table.
DDP_LIVE_TITLE = N_("DDP lab, live on {n} gloo ranks (log: {path})")
DDP_REUSED_TITLE = N_("DDP lab, the live run on {n} gloo ranks of {when}, reused (log: {path})")
DDP_AGAINST_ONE = N_("DDP against one process: {steps} steps, {parameters} parameters, global batch {batch} on {n} "
                     "{backend} ranks; replicas identical; max |DDP - one process| = {diff} (rtol {rtol}, atol {atol})")
DDP_COMMITTED_TITLE = N_("DDP lab, committed log {rel} (ran on {cpu}, {backend})")
NOTES_TITLE = N_("Reading notes, citations verified against the installed sources")
SPEND_TITLE = N_("Cloud spend, {ledger}")
EXPERIMENT_SPENT = N_("{experiment}: {spent} of {ceiling}")
OPEN_RUNS = N_("open runs counted at their worst case: {runs}")
OVERRUN = N_("OVERRUN: run {run} billed {seconds} s beyond its reservation (line {line}, {cost})")
RECONCILED = N_("reconciled: {finding}")
LEDGER_LINE = N_("ledger: {confirmation}")
DIAGRAM_TITLE = N_("TP sharding diagram")
DIAGRAM_MATCHES = N_("{page}:{line} matches {plan} ({layers}) on {n} ranks; {svg} is current")
TP_TITLE = N_("TP inference speedup, committed GPU result(s)")


def gpu_results(n: int) -> str:
    """``1 GPU result`` / ``2 GPU results`` under experiments/."""
    return ngettext("{n} GPU result", "{n} GPU results", n).format(n=n)


def graded_attempts(n: int) -> str:
    """``1 graded attempt`` / ``2 graded attempts`` in the quiz log."""
    return ngettext("{n} graded attempt", "{n} graded attempts", n).format(n=n)


def ranks(n: int) -> str:
    """``1 rank`` / ``2 ranks`` of a torchrun launch."""
    return ngettext("{n} rank", "{n} ranks", n).format(n=n)
