"""The catalogue of executor versions, by stable name. Adding a version touches this file only.

Each entry cites the upstream pull requests it models, names its gates (``Policy`` fields read
from the run configuration) and its dummy role. The facts are paraphrased in
``../shared/docs/adp-executor.md`` §5-6 and §10 and were checked against upstream's sources
(no upstream code is copied here). Oldest first:

=====================  =================  =============================  =====  =========  ===========  ======================
entry                  upstream           count with a transceiver       cap    entry      KV precheck  refused after precheck
=====================  =================  =============================  =====  =========  ===========  ======================
mid-2025               NVIDIA 9521caf     legacy (inline)                no     assert     none         crash
legacy-2025            late 2025          legacy (inline)                no     assert     none         crash
early-2026             NVIDIA 16abdfc     legacy (count method)          no     assert     none         crash
prefix-2026            fork 3b06213       legacy                         yes    assert     none         crash
fix-16161              never merged       window, ungated                yes    assert     none         skip
fix-16279              merged             window if DeepSeek-V4, pp 1    yes    assert     gated path   skip in gate, else crash
tolerant-17278         NVIDIA 000515e     as fix-16279                   yes    warning    every path   skip in gate, else crash
sched-aware-16921      #16921             scheduler if gated, intent     yes    warning    every path   skip at pp 1 + transceiver, else crash
postpad-17379          NVIDIA 002f3cc     as sched-aware-16921           yes    warning    every path   as sched-aware-16921
newest                 NVIDIA 0004396     as sched-aware-16921           yes    warning    every path   skip (#18157)
kv-connector-19164     #19250, merged     as newest                      yes    warning    every path   skip
dkv                    later main         as newest; no pad under dkv    yes    warning    every path   skip
=====================  =================  =============================  =====  =========  ===========  ======================

"KV precheck": where ``_has_adp_dummy_kv_capacity`` runs before the pad allocation; a dummy it
sees cannot fit is not padded (warning once "Unable to fit the complete attention-DP dummy KV
allocation; ..."), the rank schedules 0 and the fleet skips. "Refused after precheck": the
precheck passes (or does not run) and ``add_dummy_requests`` still returns None or raises out of
pages: "crash" is the unchecked ``[0]`` (TypeError; the event loop thread dies and the peers wait
in the ``can_queue`` all-gather until the hang detector fires), "skip" a warning and no dummy.
The post-schedule pad (postpad-17379 on) looks at no request state: a rank whose requests all
await KV and that schedules 0 is padded after scheduling like any other empty batch.
"""
from __future__ import annotations

import dataclasses

from replay.errors import PolicyError
from replay.policy import (ADP_FIXES_GATE, DSV4_FIXES_GATE, FORWARD_INTENT_GATE,
                           SCHEDULER_AWARE_GATE, AllocFailure, DummyRole, EntryCheck, KvPrecheck,
                           Policy, Predicate)

_NO_CAP_NOTE = ("expected = max(ceil(total/tp), max(counts)) has no cap, so a leaked dummy raises "
                "the floor and the entry assert cannot trip: dummies leak silently.")

_MID_2025 = Policy(
    name="mid-2025",
    title="mid-2025 executor: inline legacy count, no cap, context dummy on a context arrival",
    prs=("NVIDIA 9521caf (stored py_executor.py)",),
    revision="9521caf",
    disagg_predicate=Predicate.NOT_AWAITING_KV,
    cap=False,
    entry_check=EntryCheck.ASSERT,
    alloc_failure=AllocFailure.CRASH,
    dummy_role=DummyRole.CONTEXT_ON_ARRIVAL,
    notes=_NO_CAP_NOTE + (" The dummy takes the context role in an iteration where a "
                          "context-only request arrived (read from the trace: a request first "
                          "seen in a context-server state)."),
)

_LEGACY = Policy(
    name="legacy-2025",
    title="late-2025 executor: inline legacy count, no cap on expected, generation dummy",
    prs=("late-2025 stored py_executor.py",),
    disagg_predicate=Predicate.NOT_AWAITING_KV,
    cap=False,
    entry_check=EntryCheck.ASSERT,
    alloc_failure=AllocFailure.CRASH,
    dummy_role=DummyRole.GENERATION,
    notes=_NO_CAP_NOTE + " Always a generation dummy.",
)

_EARLY_2026 = Policy(
    name="early-2026",
    title="early-2026 executor: _count_schedulable_active_requests, legacy count, still no cap",
    prs=("#12208 (the count moves into _count_schedulable_active_requests)", "NVIDIA 16abdfc"),
    revision="16abdfc",
    disagg_predicate=Predicate.NOT_AWAITING_KV,
    cap=False,
    entry_check=EntryCheck.ASSERT,
    alloc_failure=AllocFailure.CRASH,
    dummy_role=DummyRole.REQUEST_TYPES,
    notes=(_NO_CAP_NOTE + " The separate count method predates the router cap (#13347), so its "
           "presence does not mean a capped build."),
)

_PREFIX = Policy(
    name="prefix-2026",
    title="2026 build before the fix: legacy count, cap on expected, assert (NVBug 6438685)",
    prs=("#13347 (router cap, nvbug 6071070)", "#12208", "NVBug 6438685"),
    revision="fork 3b06213",
    disagg_predicate=Predicate.NOT_AWAITING_KV,
    cap=True,
    entry_check=EntryCheck.ASSERT,
    alloc_failure=AllocFailure.CRASH,
    dummy_role=DummyRole.REQUEST_TYPES,
    notes=("GENERATION_TO_COMPLETE counts as schedulable but the scheduler refuses it; a rank "
           "holding only such requests schedules 0, the fleet skips, padded dummies leak and a "
           "rank at the cap plus its leaked dummy asserts."),
)

_FIX_16161 = Policy(
    name="fix-16161",
    title="proposed fix (never merged): window count on every disaggregated run, None guarded",
    prs=("#16161 (closed as a duplicate of #16279; never merged)",),
    merged=False,
    disagg_predicate=Predicate.WINDOW,
    aggregated_predicate=Predicate.ALL,
    cap=True,
    entry_check=EntryCheck.ASSERT,
    alloc_failure=AllocFailure.SKIP,
    dummy_role=DummyRole.REQUEST_TYPES,
    notes=("The seed fix as proposed: no model or pipeline gate. It was never merged; what "
           "shipped is #16279 (fix-16279), which applies the window only to DeepSeek-V4 with "
           "pp_size 1. The aggregated path (no transceiver) keeps counting "
           "GENERATION_TO_COMPLETE on purpose (an upstream test pins it)."),
)

_FIX_16279 = Policy(
    name="fix-16279",
    title="merged fix: window count, KV precheck and pending dummy, only for DeepSeek-V4 at pp 1",
    prs=("#16279 (merged; #16161 closed as its duplicate)",),
    disagg_predicate=Predicate.WINDOW,
    count_gate=DSV4_FIXES_GATE,
    fixes_gate=DSV4_FIXES_GATE,
    cap=True,
    entry_check=EntryCheck.ASSERT,
    alloc_failure=AllocFailure.SKIP,
    alloc_failure_outside_gate=AllocFailure.CRASH,
    kv_precheck=KvPrecheck.GATED,
    rollback_on_skip=True,
    dummy_role=DummyRole.REQUEST_TYPES,
    notes=("Inside _enable_dsv4_adp_dummy_fixes (model_type deepseek_v4, pp_size 1) and with a "
           "transceiver: the window count, a KV-capacity precheck, a pending dummy rolled back "
           "when the fleet skips, a refused dummy tolerated. Any other model, or pp_size > 1, "
           "keeps the crashing count, runs no precheck and indexes the allocation result "
           "unchecked (a dummy that does not fit is a TypeError)."),
)

_TOLERANT = dataclasses.replace(
    _FIX_16279,
    name="tolerant-17278",
    title="after #16279: surplus warning instead of the entry assert, no scheduler delegation",
    prs=("#17278", "#16279", "NVIDIA 000515e"),
    revision="000515e",
    entry_check=EntryCheck.WARN,
    kv_precheck=KvPrecheck.EVERY_PATH,
    notes=("A leaked dummy no longer crashes the fleet; it is warned about and wastes capacity. "
           "The count is still #16279's, gated to DeepSeek-V4 at pp_size 1. The KV-capacity "
           "precheck now runs before the gate branch, on every path: a dummy it sees cannot fit "
           "is skipped (warning once), the rank schedules 0. A refusal the precheck does not "
           "foresee (capacity fine, add_dummy_requests returns None or raises out of pages) "
           "still reaches the ungated path's unchecked [0]: TypeError, the event loop thread "
           "dies and the peers hang in the can_queue all-gather."),
)

_SCHED = Policy(
    name="sched-aware-16921",
    title="scheduler-aware count (model/overlap/pp gate), forward intent without overlap",
    prs=("#16921", "#17278", "#16279"),
    disagg_predicate=Predicate.SCHEDULER,
    count_gate=SCHEDULER_AWARE_GATE,
    fixes_gate=ADP_FIXES_GATE,
    intent_gate=FORWARD_INTENT_GATE,
    cap=True,
    entry_check=EntryCheck.WARN,
    alloc_failure=AllocFailure.SKIP,
    alloc_failure_outside_gate=AllocFailure.CRASH,
    kv_precheck=KvPrecheck.EVERY_PATH,
    rollback_on_skip=True,
    dummy_role=DummyRole.REQUEST_TYPES,
    notes=("Three gates: the transactional dummy with pp_size 1 (any model); the scheduler "
           "delegation with pp_size 1 and, under the overlap scheduler, only deepseek_v4 or "
           "qwen3_5_moe (kimi_k2 with overlap stays on the legacy count); without overlap the "
           "pad follows the all-reduced forward intent (nobody padded when no rank has "
           "schedulable work). Pipeline-parallel and aggregated runs keep the legacy count. "
           "KV-capacity precheck on every path (from 000515e); a refusal after a passed "
           "precheck is tolerated inside the fixes gate and indexed unchecked outside it "
           "(aggregated runs, pp_size > 1)."),
)

_POSTPAD = dataclasses.replace(
    _SCHED,
    name="postpad-17379",
    title="post-schedule padding of an empty batch (rolled back on a skip on every path)",
    prs=("#17379", "#16921", "#17278", "NVIDIA 002f3cc"),
    revision="002f3cc",
    postpad_empty_batch=True,
    notes=("A rank with active requests but an empty batch gets a generation dummy after "
           "scheduling (below the cap, no live dummy, after its own KV-capacity precheck; not "
           "under pipeline parallelism). It looks at no request state: a rank whose requests "
           "all await KV and that schedules 0 is padded too. That dummy is pending whatever the "
           "fixes gate says, so a skipped iteration rolls it back on every path (upstream's "
           "test runs with the fixes flag off and on). The pre-schedule pad's legacy path "
           "(aggregated, pp_size > 1) still indexes a refused allocation unchecked."),
)

_NEWEST = dataclasses.replace(
    _POSTPAD,
    name="newest",
    title="newest stored main: as postpad-17379, and the legacy path tolerates a refused dummy",
    prs=("#18157", "#17978 (its description is the legacy-path guard read in 0004396)", "#17379",
         "#16921", "#17278", "#16279", "NVIDIA 0004396"),
    revision="0004396",
    alloc_failure_outside_gate=AllocFailure.SKIP,
    notes=("Pipeline-parallel and aggregated ADP, and overlap runs of models outside the "
           "scheduler-aware gate, stay on the legacy count, so a dummy can still leak there (now "
           "only warned about). #18157 added only the guard after the KV-capacity precheck: on "
           "the legacy path a refusal the precheck did not foresee (None or out of pages) is a "
           "warning and no dummy instead of the unchecked [0] (PR #17978's description, "
           "'Handle refused attention DP pad dummy on non-DSv4 ranks', is that guard). The "
           "every-path precheck itself dates from 000515e (tolerant-17278). On the fixes path "
           "0004396 also asserts that no pending dummy is left before allocating one. 0004396 "
           "already has the disaggregation "
           "coordinator (#18595, #18827, #19128, #19266: transfer loop code in "
           "disaggregation/orchestration, reached through self.disagg); the pad methods stay "
           "on PyExecutor."),
)

_KV_CONNECTOR = dataclasses.replace(
    _NEWEST,
    name="kv-connector-19164",
    title="ADP with KV-cache connectors (#19250): as newest, and the post-schedule pad after an "
          "async load",
    prs=("#19250 (merged 2026-09-16)", "#19164 (open; the proposal #19250 was ported from)",
         "#18157", "#17379"),
    revision="",
    notes=("https://github.com/NVIDIA/TensorRT-LLM/pull/19250. _kv_connector_start_batch parks a "
           "scheduled context request whose KV loads asynchronously (state "
           "DISAGG_GENERATION_TRANS_IN_PROGRESS, as the connector did before ADP; CONTEXT_INIT "
           "again when the load finishes) and, when that empties the owner's batch, calls "
           "_pad_empty_attention_dp_batch so the peers can run "
           "(test_async_padding_preserves_connector_plan). A refused pad (no dummy capacity or "
           "sequence slot) leaves the batch empty and the ADP forward gate defers it, the fleet "
           "skips (the connector guide's ADP section); #19164's wait for the first finished load "
           "(test_async_without_dummy_keeps_prepared_batch) was not merged. On every frame the "
           "trace format can express (states at pad entry, the recorded batch) it decides as "
           "newest: the park happens after scheduling and the post-schedule pad looks at no "
           "request state. The name keeps #19164, the number it was catalogued under while open; "
           "kv-connector-19250 is accepted for it."),
)

_DKV = dataclasses.replace(
    _NEWEST,
    name="dkv",
    title="later main: as newest, and with a dkv configuration both pads return at once",
    prs=("later main (test_dkv_skips_rank_local_dummy_allocation)", "#18157", "#17379"),
    revision="",
    dkv_skips_pads=True,
    notes=("With dkv_enabled both _pad_attention_dp_dummy_request and "
           "_pad_empty_attention_dp_batch return before reading anything (upstream's test calls "
           "them on an executor holding only dkv_enabled): no entry check, no dummy, so an "
           "idle rank schedules 0 and the fleet skips. Without dkv, as newest. The executor "
           "revision is not among the stored sources (the test file is); a run record says "
           "dkv with \"dkv_enabled\": true."),
)

#: Every catalogue policy by name, oldest first.
CATALOGUE: dict[str, Policy] = {p.name: p for p in
                                (_MID_2025, _LEGACY, _EARLY_2026, _PREFIX, _FIX_16161, _FIX_16279,
                                 _TOLERANT, _SCHED, _POSTPAD, _NEWEST, _KV_CONNECTOR, _DKV)}


#: Other names a spec may use for an entry, to the entry's name. The entry keeps the name it was
#: catalogued under (saved specs, run records and exported tests name it); the alias is the
#: number it merged as.
ALIASES: dict[str, str] = {"kv-connector-19250": "kv-connector-19164"}


def get_policy(name: str) -> Policy:
    """Look a catalogue policy up by name or alias, with the known names in the error."""
    try:
        return CATALOGUE[ALIASES.get(name, name)]
    except KeyError:
        raise PolicyError(f"unknown policy {name!r}",
                          hint="known policies: " + ", ".join(CATALOGUE)) from None


def policy_names() -> list[str]:
    return list(CATALOGUE)
