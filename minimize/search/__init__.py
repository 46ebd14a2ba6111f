"""The search: the reduction problem (the one place a step is taken), the scheduler of passes
in tiers, the searches as generators, speculation, localization, and the passes. (docs/design.md, "Rooms")"""

DONE = "done"  # ReductionProblem.current_pass once the search has ended (read by the live line, torch-free)
# the per-pass table's rows of the checks outside the passes (one oracle call each), so
# the rows add up to the calls a report states
CHECK_ORIGINAL, CHECK_STATIC_SIZES, READ_VALUES_OFF = "check_original", "check_static_sizes", "read_values_off"
CHECKS = (CHECK_ORIGINAL, CHECK_STATIC_SIZES, READ_VALUES_OFF)
