"""Writing the outputs: repro.py (from real functions), report.md and its snippet, summary,
the journal a run resumes from, the out folder's rules, and running repro.py alone. (docs/design.md, "Rooms")"""
