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


def test_each_start_up_step_is_timed_from_the_end_of_the_one_before(monkeypatch):
    """summary.json's timing.load: each step's own seconds, not the time since the start
    (which would make the steps add up to more than the load took)."""
    from types import SimpleNamespace

    from minimize.run import steps

    now = iter([10.0, 12.5, 13.0, 20.0])
    monkeypatch.setattr(steps, "time", SimpleNamespace(monotonic=lambda: next(now)))
    clock = steps.StepClock()
    for name in ("load_model", "prepare", "eager_values"):
        clock.step(name)
    assert clock.seconds == {"load_model": 2.5, "prepare": 0.5, "eager_values": 7.0}
