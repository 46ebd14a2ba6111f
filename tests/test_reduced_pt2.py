"""reduced.pt2: the same reduced program gives the same bytes, and loads back as that program."""

from __future__ import annotations

from pathlib import Path

import torch

from minimize.emit.outputs import write_reduced
from minimize.program.inputs import prepare
from minimize.program.model import Program, Slice, load_exported


def test_reduced_pt2_is_the_same_bytes_for_the_same_program(host_program, tmp_path: Path):
    model, inputs = host_program
    x = list(torch.load(inputs))
    program = Program(prepare(load_exported(model), "cpu"), x)
    # Two slices of the same nodes: two graphs, alive at once at two addresses, as in two
    # runs (torch records id(graph) in each node's provenance, meta["from_node"])
    pieces: list[Slice] = [program.materialize(program.all_kept()) for _ in range(2)]
    files = []
    (tmp_path / "a" / ".reduced-k1ll3d").mkdir(parents=True)  # a kill -9 mid-save left its temporary folder
    (tmp_path / "a" / ".reduced-k1ll3d" / "reduced.pt2").write_bytes(b"")
    for name, piece in zip("ab", pieces):
        (tmp_path / name).mkdir(exist_ok=True)
        files.append(write_reduced(tmp_path / name, piece.gm, program.inputs_for(piece)))
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["reduced.pt2"]  # the next save removes it
    assert files[0].read_bytes() == files[1].read_bytes()
    piece, loaded = pieces[0], torch.export.load(str(files[0]))
    targets = [str(n.target) for n in piece.gm.graph.nodes if n.op == "call_function"]
    assert [str(n.target) for n in loaded.graph.nodes if n.op == "call_function"] == targets
    args = program.inputs_for(piece)
    torch.testing.assert_close(loaded.module()(*args), piece.gm(*args))
