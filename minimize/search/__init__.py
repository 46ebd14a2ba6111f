"""The search: the reduction problem (the one place a step is taken), the scheduler of passes
in tiers, the searches as generators, speculation, localization, and the passes. (docs/design.md, "Rooms")"""

DONE = "done"  # ReductionProblem.current_pass once the search has ended (read by the live line, torch-free)
