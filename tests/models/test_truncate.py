"""A network cut at a tap (``stir.models.truncate``): the same representation, one graph, compiled or not."""
import logging
from dataclasses import replace

import pytest
import torch

from stir.config.schema import ModelConfig
from stir.inversion import ExecutionConfig, InversionConfig, invert
from stir.models import build, representation
from stir.models.fake_relu import fake_relu
from stir.models.truncate import CompiledOnce, TapForward


def _net(arch="resnet18"):
    torch.manual_seed(0)
    return build(ModelConfig(arch, width=4), 10, (0.5,) * 3, (0.25,) * 3).eval()


@pytest.mark.parametrize("tap", ["stem", "layer2.0@spatial_mean", "layer3.1.sum", "penultimate", "logits"])
def test_the_cut_network_reads_the_same_representation(tap):
    m, x = _net(), torch.rand(5, 3, 32, 32)
    cut = TapForward(m, tap)
    assert torch.equal(representation(cut, x, tap), representation(m, x, tap))
    names = {name for name, _ in cut.net.named_modules()}
    if tap == "stem":  # nothing after the tap is kept
        assert not any(name.startswith("layer") for name in names)


def test_fake_relu_sites_survive_the_cut():
    m, x = _net(), torch.rand(3, 3, 32, 32)
    cut = TapForward(m, "penultimate")
    assert cut.fake_relu_sites == ("net.layer4.0.relu_out", "net.layer4.1.relu_out")

    def grad(model):
        xi = x.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(representation(model, xi, "penultimate").sum(), xi)
        return g

    with fake_relu(m), fake_relu(cut):
        assert torch.allclose(grad(m), grad(cut), atol=1e-6)
    assert not torch.allclose(grad(m), grad(cut) * 0)  # non-trivial gradients


def test_a_tap_that_is_no_module_cannot_be_cut():
    m = _net()
    m.named_taps = {"fn": __import__("stir.models.taps", fromlist=["TapPoint"]).TapPoint(fn=lambda model, x: x.flatten(1))}
    with pytest.raises(TypeError, match="not a module"):
        TapForward(m, "fn")


def test_a_compilation_that_fails_runs_eagerly(caplog):
    def breaks_the_graph(x):
        print("a graph break")  # noqa: T201 - dynamo cannot put this in a graph: fullgraph=True refuses it
        return x + 1

    runner = CompiledOnce(breaks_the_graph, fullgraph=True)
    with caplog.at_level(logging.WARNING):
        assert torch.equal(runner(torch.zeros(2)), torch.ones(2))
        assert torch.equal(runner(torch.zeros(2)), torch.ones(2))
    assert runner.compiled is None and sum("running eagerly" in r.message for r in caplog.records) == 1


@pytest.mark.slow  # compiles a ResNet18 forward and backward (tens of seconds)
def test_a_compiled_inversion_equals_the_eager_one_up_to_rounding():
    m, x = _net(), torch.rand(6, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    cfg = InversionConfig(steps=10, record_steps=())
    eager = invert(m, x, "penultimate", cfg, run=ExecutionConfig(warn_below=0.0))
    comp = invert(m, x, "penultimate", cfg, run=ExecutionConfig(warn_below=0.0, compile=True))
    assert (eager.x_prime - comp.x_prime).abs().max() < 1e-3
    assert (eager.residual - comp.residual).abs().max() < 1e-4
