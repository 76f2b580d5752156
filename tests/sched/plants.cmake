# The planted bugs of the schedule checker (docs/CONTRACT.md V4,
# tests/sched/PLANTS.md), one entry each:
#   NAME:sources:scenario:arguments
# NAME: the CIRCUIT_PLANT_<NAME> switch that brings the defect back;
# sources: the files compiled with it ("a.c+b.c"; "*": a header's plant, every
# source); scenario and arguments ("+" between words): the checker's run
# that must catch it (schedule.planted.<name> passes when it does).
set(CIRCUIT_SCHED_PLANTS
  "HALFOPEN_ALIAS_WINDOW:probes.c:generation_seam:--runs+3000+--seconds+10"
  "HALFOPEN_ALIAS_SLOTS:probes.c:generation_seam:--runs+3000+--seconds+10"
  "SLOT0_BIT:probes.c:generation_seam:--runs+3000+--seconds+10"
  "TIMEOUT_FREE_THEN_COUNT:probes.c:halfopen_probes:--runs+3000+--seconds+10"
  "STATS_GEN_WIDEN:word.c:generation_seam:--runs+3000+--seconds+10"
  "INTENT_CALL_CTX:counting.c:operator:--runs+3000+--seconds+10"
  "INTENT_STALE_MAKER:counting.c:operator:--runs+3000+--seconds+10"
  "STATE_READ_STALE:*:halfopen_probes:--runs+3000+--seconds+10"
  "OPERATOR_STALE_CLOCK:breaker.c:operator:--runs+3000+--seconds+10"
  "PROBE_STALE_CLOCK:counting.c:halfopen_probes:--runs+3000+--seconds+10"
  "RESET_INTENT_EALREADY:breaker.c:operator:--runs+3000+--seconds+10"
  "STATS_MOVED_RING:counting.c:closed_trip:--runs+3000+--seconds+10+--strict-closed-stats"
  "DESC_TAG14:*:descriptor_tags:--runs+3000+--seconds+10"
)
