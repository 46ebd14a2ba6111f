"""The workers' state file: written without copying what torch.save can write as it is (a
large model's weights), mapped by the workers, and every value read back as it was."""

from __future__ import annotations

import torch

from minimize.run.worker_side import _owned


def test_only_what_cannot_be_saved_as_it_is_gets_a_storage_of_its_own(tmp_path):
    weight = torch.randn(64, 64)
    big = torch.randn(1000)
    complex_ = torch.randn(4, 2)
    with torch.no_grad():
        values = {"weight": weight, "view": weight.t(), "slice": big[:2].clone()[:2],
                  "saved_slice": torch.load(_saved(tmp_path, big[:2]), weights_only=True),
                  "as_complex": torch.view_as_complex(complex_), "complex_parts": complex_,
                  "bits": weight.view(torch.int32), "pair": (weight, weight.t())}
    owned = _owned(values)
    # Each of these is a view, on a larger storage, or on one another value reads as another
    # dtype (the weight is read as int32 too): each is copied.
    assert not [k for k in values if k != "pair"
                if owned[k].untyped_storage().data_ptr() == values[k].untyped_storage().data_ptr()]
    plain = _owned({"weight": weight, "view": weight.t()})
    assert plain["weight"].untyped_storage().data_ptr() == weight.untyped_storage().data_ptr()  # not copied
    assert plain["view"].untyped_storage().nbytes() == weight.numel() * 4 and plain["view"]._base is None
    f = tmp_path / "values.pt"
    torch.save(owned, str(f))  # refused before for a storage seen as two dtypes
    back = torch.load(str(f), mmap=True, weights_only=False)
    for k, v in values.items():
        for a, b in zip(v if isinstance(v, tuple) else (v,), back[k] if isinstance(v, tuple) else (back[k],)):
            assert torch.equal(a, b), k
    assert back["saved_slice"].untyped_storage().nbytes() == 8  # not the 4000 bytes of `big`


def _saved(tmp_path, t: torch.Tensor):
    path = tmp_path / "slice.pt"
    torch.save(t, str(path))
    return str(path)
