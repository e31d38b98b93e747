"""Weight-only int8 storage (stir.zoo.quantize): its properties on seeded tensors and a real network."""
import io

import pytest
import torch

from stir.config.schema import ModelConfig
from stir.models import build, channel_stats
from stir.zoo.quantize import QMAX, SCALE_SUFFIX, dequantize, is_quantized, quantize_state


def seeded_state():
    g = torch.Generator().manual_seed(0)
    return {"conv.weight": torch.randn(8, 3, 3, 3, generator=g) * torch.linspace(0.01, 3.0, 8).view(-1, 1, 1, 1),
            "fc.weight": torch.randn(10, 32, generator=g), "fc.bias": torch.randn(10, generator=g),
            "bn.running_mean": torch.randn(8, generator=g), "bn.num_batches_tracked": torch.tensor(7)}


def test_weights_become_int8_with_one_scale_per_output_channel_the_rest_stays():
    state = seeded_state()
    q = quantize_state(state)
    assert set(q) == set(state) | {"conv.weight" + SCALE_SUFFIX, "fc.weight" + SCALE_SUFFIX}
    assert q["conv.weight"].dtype == torch.int8 and q["conv.weight"].shape == state["conv.weight"].shape
    assert q["conv.weight" + SCALE_SUFFIX].shape == (8,) and q["fc.weight" + SCALE_SUFFIX].shape == (10,)
    assert torch.equal(q["fc.bias"], state["fc.bias"]) and torch.equal(q["bn.running_mean"], state["bn.running_mean"])
    assert q["bn.num_batches_tracked"].dtype == torch.int64 and q["bn.num_batches_tracked"].item() == 7
    # every channel uses the full range: its largest weight is +-127 steps
    assert torch.all(q["conv.weight"].flatten(1).abs().amax(dim=1) == QMAX)


def test_the_round_trip_error_is_at_most_half_a_step_per_channel_and_the_largest_weight_is_kept():
    state = seeded_state()
    q = quantize_state(state)
    back = dequantize(q)
    for name in ("conv.weight", "fc.weight"):
        w, scale = state[name].flatten(1), q[name + SCALE_SUFFIX]
        err = (back[name].flatten(1) - w).abs()
        assert torch.all(err <= scale[:, None] / 2 * (1 + 1e-6)), name
        # the error follows each channel's own scale: the small channels are not rounded to zero
        assert torch.all(back[name].flatten(1).abs().amax(dim=1) > 0)
        assert torch.allclose(back[name].flatten(1).abs().amax(dim=1), w.abs().amax(dim=1), rtol=1e-6)
    assert back["fc.bias"].dtype == torch.float32 and back["bn.num_batches_tracked"].item() == 7


def test_an_all_zero_channel_stays_zero_and_quantizing_twice_changes_nothing():
    state = {"w": torch.zeros(3, 4)}
    state["w"][1] = torch.tensor([1.0, -2.0, 0.5, 0.0])
    q = quantize_state(state)
    assert torch.equal(dequantize(q)["w"][0], torch.zeros(4)) and torch.all(torch.isfinite(q["w" + SCALE_SUFFIX]))
    again = quantize_state(dequantize(q))
    assert torch.equal(again["w"], q["w"]) and torch.equal(again["w" + SCALE_SUFFIX], q["w" + SCALE_SUFFIX])


def test_the_file_is_a_plain_tensor_dict_and_a_network_loads_it_with_nearly_its_logits():
    torch.manual_seed(0)
    net = build(ModelConfig(arch="resnet18", width=16), 10, *channel_stats("cifar10")).eval()
    buffer = io.BytesIO()
    torch.save(quantize_state(net.state_dict()), buffer)
    stored = torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)  # no code runs to read it
    assert is_quantized(stored) and not is_quantized(net.state_dict())
    other = build(ModelConfig(arch="resnet18", width=16), 10, *channel_stats("cifar10")).eval()
    other.load_state_dict(dequantize(stored))
    x = torch.rand(16, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = net(x), other(x)
    assert not torch.equal(a, b)  # another function ...
    assert (a - b).abs().max() < 0.05 * a.abs().max()  # ... close to the original
    fp32 = io.BytesIO()
    torch.save(net.state_dict(), fp32)
    assert len(buffer.getvalue()) < 0.3 * len(fp32.getvalue())  # width 16: the tensors outweigh the zip headers


def test_a_malformed_int8_state_is_refused_with_the_key_named():
    q = quantize_state(seeded_state())
    orphan = {k: v for k, v in q.items() if k != "fc.weight"}
    with pytest.raises(ValueError, match=r"fc.weight::int8_scale has no tensor 'fc.weight'"):
        dequantize(orphan)
    no_scale = {**q, "extra": torch.zeros(2, 2, dtype=torch.int8)}
    with pytest.raises(ValueError, match=r"extra is int8 without its scale"):
        dequantize(no_scale)
    bad_shape = {**q, "fc.weight" + SCALE_SUFFIX: torch.ones(3)}
    with pytest.raises(ValueError, match=r"fc.weight is torch.int8 of shape \(10, 32\) with a scale of shape \(3,\)"):
        dequantize(bad_shape)
    with pytest.raises(ValueError, match="the int8 format's scale suffix"):
        quantize_state({"a::int8_scale": torch.ones(2, 2)})
