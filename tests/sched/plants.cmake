# The planted bugs of the schedule checker (docs/CONTRACT.md V4,
# tests/sched/PLANTS.md), one entry each:
#   NAME:sources:scenario:arguments
# NAME: the CIRCUIT_PLANT_<NAME> switch that brings the defect back;
# sources: the files compiled with it ("a.c+b.c"; "*": a header's plant, every
# source); scenario and arguments ("+" between words): the checker's run
# that must catch it (schedule.planted.<name> passes when it does).
set(CIRCUIT_SCHED_PLANTS
  "PHANTOM_PROBE:probes.c:phantom:--runs+3000+--seconds+10"
  "HALFOPEN_ALIAS_SLOTS:probes.c:generation_seam:--runs+3000+--seconds+10"
  "INTENT_CALL_CTX:counting.c:operator:--runs+3000+--seconds+10"
)
# Planted (src/, tests/sched/PLANTS.md) but not caught by any scenario yet
# within 3 x 3000 schedules; not built. What each needs is in PLANTS.md:
# most need the clock to move inside a schedule (finding F2 in
# tests/sched/README.md keeps ticks out of the scenarios for now).
set(CIRCUIT_SCHED_PLANTS_NOT_CAUGHT
  HALFOPEN_ALIAS_WINDOW SLOT0_BIT STATS_GEN_WIDEN TIMEOUT_FREE_THEN_COUNT
  INTENT_STALE_MAKER STATE_READ_STALE OPERATOR_STALE_CLOCK PROBE_STALE_CLOCK
  RESET_INTENT_EALREADY STATS_MOVED_RING DESC_TAG14 ACQ_RESTART
)
