# The planted bugs of the schedule checker (docs/CONTRACT.md V4,
# tests/sched/PLANTS.md): NAME:file.c, the source file whose
# CIRCUIT_PLANT_<NAME> switch brings the defect back. Each plant is a copy of
# the checker's core with that one file compiled with the switch.
set(CIRCUIT_SCHED_PLANTS
)
