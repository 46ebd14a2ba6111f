"""The program model: the exported program cut to input (`model.py`), the candidate as a value,
the inputs, the graph's file format, and the model and inputs files read without torch. (docs/design.md, "Rooms")"""
