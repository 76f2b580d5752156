# The planted bugs of the schedule checker (docs/CONTRACT.md V4,
# tests/sched/PLANTS.md), one entry each:
#   NAME:sources:scenario:arguments
# NAME: the CIRCUIT_PLANT_<NAME> switch that brings the defect back;
# sources: the files compiled with it ("a.c+b.c"; "*": a header's plant, every
# source); scenario and arguments ("+" between words): the checker's run
# that must catch it (schedule.planted.<name> passes when it does).
set(CIRCUIT_SCHED_PLANTS
  "PHANTOM_PROBE:probes.c:phantom:--runs+2000+--seconds+4"
  "HALFOPEN_ALIAS_SLOTS:probes.c:generation_seam:--runs+2000+--seconds+4"
  "INTENT_CALL_CTX:counting.c:operator:--runs+2000+--seconds+4"
  "RESERVE_STALE_DUE:probes.c:stale_due:--runs+2000+--seconds+4"
  "SEAM_BIT0_ABA:probes.c:seam_window:--runs+2000+--seconds+4"
  "HALFOPEN_ALIAS_WINDOW:probes.c:seam_window:--runs+2000+--seconds+4"
  "SLOT0_BIT:probes.c:seam_slot0:--runs+2000+--seconds+4"
  "STATS_GEN_WIDEN:word.c:closed_trip:--runs+2000+--seconds+4"
  "TIMEOUT_FREE_THEN_COUNT:probes.c:halfopen_probes:--runs+2000+--seconds+4"
  "RESET_INTENT_EALREADY:breaker.c:reset_trip:--runs+2000+--seconds+4"
  "DESC_TAG14:*:descriptor_tags:--runs+2000+--seconds+4"
  "INTENT_STALE_MAKER:counting.c:all:--runs+2000+--seconds+4"
  "STATE_READ_STALE:*:deaths:--runs+2000+--seconds+4"
  "OPERATOR_STALE_CLOCK:breaker.c:all:--runs+2000+--seconds+4"
  "PROBE_STALE_CLOCK:counting.c:operator:--runs+2000+--seconds+4"
  "STATS_MOVED_RING:counting.c:all:--runs+2000+--seconds+4"
  "ACQ_RESTART:counting.c:all:--runs+2000+--seconds+4"
)
