"""Realistic host programs with real compiler bugs in them, for GPU reductions and the bench.

Each module has `build() -> (model, inputs)` and a `RUN` dict: the trtmin options that
reproduce its bug (oracle, backend, tolerances). `python -m bench.hosts NAME DIR` exports
DIR/NAME.pt2 and DIR/NAME_inputs.pt, as a user's `torch.export` would.
"""
