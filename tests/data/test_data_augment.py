"""Batched crop + flip against a per-image reference loop; uint8 -> float conversion."""
import pytest
import torch
import torch.nn.functional as F

from stir.data import augment_batch, crop_flip, sample_crop_flip, to_float


def reference(x, top, left, flip, padding):
    """One image at a time, the obvious way: pad, slice the window, flip."""
    out = []
    for img, t, l, f in zip(x, top.tolist(), left.tolist(), flip.tolist()):
        padded = F.pad(img, (padding,) * 4)
        crop = padded[:, t:t + img.shape[1], l:l + img.shape[2]]
        out.append(crop.flip(-1) if f else crop)
    return torch.stack(out)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_matches_reference_loop(dtype):
    x = torch.randint(0, 256, (16, 3, 8, 10), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    x = x.to(dtype) / 255 if dtype.is_floating_point else x
    out = augment_batch(x, torch.Generator().manual_seed(1), padding=3)
    assert out.shape == x.shape and out.dtype == x.dtype
    top, left, flip = sample_crop_flip(16, 3, "cpu", torch.Generator().manual_seed(1))  # the same draws
    assert 0 <= int(top.min()) and int(top.max()) <= 6 and flip.any() and not flip.all()
    assert torch.equal(out, reference(x, top, left, flip, 3))


def test_each_output_is_a_window_of_the_padded_image():
    # Independent of the parameter draws: every output is some (possibly mirrored) 32x32 window.
    x = torch.randint(1, 256, (6, 3, 32, 32), generator=torch.Generator().manual_seed(2), dtype=torch.uint8)
    out = augment_batch(x, torch.Generator().manual_seed(3))
    padded = F.pad(x, (4, 4, 4, 4))
    for img, p in zip(out, padded):
        windows = [p[:, t:t + 32, l:l + 32] for t in range(9) for l in range(9)]
        assert any(torch.equal(img, w) or torch.equal(img, w.flip(-1)) for w in windows)


def test_flip_only_is_exact_and_deterministic():
    x = torch.rand(8, 3, 5, 5)
    out = augment_batch(x, torch.Generator().manual_seed(0), padding=0)
    for a, b in zip(out, x):
        assert torch.equal(a, b) or torch.equal(a, b.flip(-1))
    assert torch.equal(out, augment_batch(x, torch.Generator().manual_seed(0), padding=0))
    assert torch.equal(augment_batch(x, padding=0, flip=False), x)
    flip_all = crop_flip(x, torch.zeros(8, dtype=torch.long), torch.zeros(8, dtype=torch.long),
                         torch.ones(8, dtype=torch.bool), 0)
    assert torch.equal(flip_all, x.flip(-1))


def test_input_untouched_and_global_rng():
    x = torch.randint(0, 256, (4, 3, 6, 6), dtype=torch.uint8)
    before = x.clone()
    torch.manual_seed(5)
    a = augment_batch(x)
    torch.manual_seed(5)
    assert torch.equal(a, augment_batch(x)) and torch.equal(x, before)


def test_to_float():
    x = torch.tensor([[[[0, 255], [51, 102]]]], dtype=torch.uint8).expand(1, 3, 2, 2)
    y = to_float(x)
    assert y.dtype == torch.float32 and y.min() == 0 and y.max() == 1 and torch.allclose(y[0, 0, 1], torch.tensor([0.2, 0.4]))
    assert to_float(y) is not None and to_float(y).dtype == torch.float32
    with pytest.raises(TypeError):
        to_float(x.long())


def test_reflect_padding_matches_a_per_image_reference():
    """padding_mode=reflect: torchvision's RandomCrop(padding_mode="reflect") window, mirrored where flipped."""
    x = torch.randint(0, 256, (12, 3, 8, 8), generator=torch.Generator().manual_seed(4), dtype=torch.uint8)
    out = augment_batch(x, torch.Generator().manual_seed(5), padding=2, padding_mode="reflect")
    top, left, flip = sample_crop_flip(12, 2, "cpu", torch.Generator().manual_seed(5))
    expected = []
    for img, t, l, f in zip(x, top.tolist(), left.tolist(), flip.tolist()):
        padded = F.pad(img[None].float(), (2,) * 4, mode="reflect")[0].to(torch.uint8)
        crop = padded[:, t:t + 8, l:l + 8]
        expected.append(crop.flip(-1) if f else crop)
    assert torch.equal(out, torch.stack(expected))
    assert not torch.equal(out, augment_batch(x, torch.Generator().manual_seed(5), padding=2))  # zeros differ
    with pytest.raises(ValueError, match="padding_mode"):
        augment_batch(x, padding_mode="circular")


def test_augment_of_a_data_config():
    from stir.config.schema import DataConfig
    from stir.data import Augment

    assert Augment.of(DataConfig()) == Augment(4, True, "zeros")
    assert Augment.of(DataConfig(augment=False)) is None
    cfg = DataConfig(crop_padding=2, padding_mode="reflect", flip=False)
    x = torch.randint(0, 256, (5, 3, 8, 8), dtype=torch.uint8)
    a = Augment.of(cfg)(x, torch.Generator().manual_seed(0))
    assert torch.equal(a, augment_batch(x, torch.Generator().manual_seed(0), padding=2, flip=False, padding_mode="reflect"))
