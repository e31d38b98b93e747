"""The inversion cache: hits on identical inputs, misses when any part of the key changes, never
trusts a broken entry, leaves no entry behind a killed inversion."""
import copy
import logging
from dataclasses import replace

import pytest
import torch
from torch import nn

from invtest_utils import noise_images, tiny_net
from stir.inversion import ExecutionConfig, InversionConfig, invert, invert_adversarial
from stir.models.identity import content_identity
from stir import atomic
from stir.inversion import engine


def _entries(folder):
    return sorted(p.name for p in folder.glob("*.pt"))


def _no_compute(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the inversion was recomputed")

    monkeypatch.setattr(engine, "solve", fail)


def test_hit_on_identical_inputs(tmp_path, monkeypatch):
    cfg, run = InversionConfig(steps=4), ExecutionConfig(cache_dir=str(tmp_path))
    first = invert(tiny_net(), noise_images(3), "logits", cfg, run=run)
    assert not first.from_cache and len(_entries(tmp_path)) == 1
    _no_compute(monkeypatch)
    # a copy of the model, a copy of the images, settings that cannot change x': still a hit
    again = invert(copy.deepcopy(tiny_net()), noise_images(3).clone(), "logits", cfg, run=replace(run, batch_size=2, progress=True))
    assert again.from_cache
    for name in ("x_prime", "residual", "l2_to_original", "steps", "history"):
        assert torch.equal(getattr(first, name), getattr(again, name)), name
    assert again.evaluations == first.evaluations


def test_hit_reuses_the_inversion_for_every_m2_and_reclassifies_tolerance(tmp_path, monkeypatch):
    cfg, run = InversionConfig(mode="faithful", steps=4), ExecutionConfig(cache_dir=str(tmp_path))
    base = invert(tiny_net(), noise_images(3), "logits", cfg, run=run)
    _no_compute(monkeypatch)
    with_m2 = invert(tiny_net(), noise_images(3), "logits", replace(cfg, tolerance=10.0), m2=tiny_net(1), run=run)
    assert with_m2.from_cache and with_m2.m2_distance is not None and with_m2.m2_distance.shape == (3,)
    assert with_m2.is_iri.all() and torch.equal(with_m2.residual, base.residual)


def _changed_inputs():
    """(name, model, images, tap, cfg changes) each differing from the base in one part of the key."""
    weights = tiny_net()
    with torch.no_grad():
        weights[0].weight[0, 0, 0, 0] += 1e-3
    stats = tiny_net()
    stats[1].running_mean[0] += 1e-3  # a buffer, not a parameter
    pixel = noise_images(3)
    pixel[0, 0, 0, 0] = 1 - pixel[0, 0, 0, 0]
    return [
        ("weights", weights, noise_images(3), "logits", {}),
        ("buffer", stats, noise_images(3), "logits", {}),
        ("images", tiny_net(), pixel, "logits", {}),
        ("tap", tiny_net(), noise_images(3), "2", {}),
        ("seed", tiny_net(), noise_images(3), "logits", {"seed": 1}),
        ("seed_kind", tiny_net(), noise_images(3), "logits", {"seed_kind": "uniform"}),
        ("steps", tiny_net(), noise_images(3), "logits", {"steps": 5}),
        ("lr", tiny_net(), noise_images(3), "logits", {"lr": 0.1}),
        ("tolerance (early stop)", tiny_net(), noise_images(3), "logits", {"tolerance": 0.5}),
        ("mode", tiny_net(), noise_images(3), "logits", {"mode": "faithful"}),
        ("normalize_residual", tiny_net(), noise_images(3), "logits", {"normalize_residual": False}),
        ("fake_relu", tiny_net(), noise_images(3), "logits", {"fake_relu": True}),
        ("record_steps", tiny_net(), noise_images(3), "logits", {"record_steps": (2,)}),
    ]


def test_miss_when_any_part_of_the_key_changes(tmp_path):
    cfg, run = InversionConfig(mode="fast", steps=4), ExecutionConfig(cache_dir=str(tmp_path))
    invert(tiny_net(), noise_images(3), "logits", cfg, run=run)
    for i, (name, model, images, tap, changes) in enumerate(_changed_inputs()):
        r = invert(model, images, tap, replace(cfg, **changes), run=run)
        assert not r.from_cache, name
        assert len(_entries(tmp_path)) == i + 2, name


def test_adversarial_entries_are_keyed_on_both_models(tmp_path, monkeypatch):
    cfg, run = InversionConfig(steps=3), ExecutionConfig(cache_dir=str(tmp_path))
    first = invert_adversarial(tiny_net(), tiny_net(1), noise_images(3), "logits", cfg=cfg, run=run)
    assert not invert_adversarial(tiny_net(), tiny_net(2), noise_images(3), "logits", cfg=cfg, run=run).from_cache
    assert not invert_adversarial(tiny_net(), tiny_net(1), noise_images(3), "logits", cfg=replace(cfg, adversarial_weight=0.5), run=run).from_cache
    assert not invert_adversarial(tiny_net(), tiny_net(1), noise_images(3), "logits",
                                  cfg=replace(cfg, adversarial_objective="paper"), run=run).from_cache
    assert not invert(tiny_net(), noise_images(3), "logits", cfg, run=run).from_cache  # arbitrary and adversarial never mix
    _no_compute(monkeypatch)
    again = invert_adversarial(tiny_net(), tiny_net(1), noise_images(3), "logits", cfg=cfg, run=run)
    assert again.from_cache and torch.equal(again.m2_distance, first.m2_distance)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "foreign"])
def test_a_broken_entry_is_recomputed_never_trusted(tmp_path, caplog, damage):
    cfg, run = InversionConfig(steps=4), ExecutionConfig(cache_dir=str(tmp_path))
    original = invert(tiny_net(), noise_images(3), "logits", cfg, run=run)
    (path,) = tmp_path.glob("*.pt")
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "garbage":
        path.write_bytes(b"not a torch file")
    else:  # a valid file of another inversion (3 images -> 2) under this key's name
        other = invert(tiny_net(), noise_images(2), "logits", cfg, run=ExecutionConfig(cache_dir=str(tmp_path / "other")))
        (other_path,) = (tmp_path / "other").glob("*.pt")
        path.write_bytes(other_path.read_bytes())
        assert other.x_prime.shape[0] == 2
    with caplog.at_level(logging.WARNING, logger="stir.inversion.cache"):
        again = invert(tiny_net(), noise_images(3), "logits", cfg, run=run)
    assert "unusable" in caplog.text
    assert not again.from_cache and torch.equal(again.x_prime, original.x_prime)
    assert invert(tiny_net(), noise_images(3), "logits", cfg, run=run).from_cache  # rewritten, valid


def test_a_killed_inversion_leaves_no_entry(tmp_path, monkeypatch):
    cfg, run = InversionConfig(steps=4), ExecutionConfig(cache_dir=str(tmp_path))

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(engine, "solve", killed)
        with pytest.raises(KeyboardInterrupt):
            invert(tiny_net(), noise_images(3), "logits", cfg, run=run)
    assert list(tmp_path.iterdir()) == []

    def killed_before_rename(src, dst):  # the temporary file is fully written, the rename never happens
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(atomic.os, "replace", killed_before_rename)
        with pytest.raises(KeyboardInterrupt):
            invert(tiny_net(), noise_images(3), "logits", cfg, run=run)
    assert list(tmp_path.iterdir()) == []
    assert not invert(tiny_net(), noise_images(3), "logits", cfg, run=run).from_cache


def test_the_cache_keys_models_by_their_content_identity():
    a, b = tiny_net(), copy.deepcopy(tiny_net())
    assert content_identity(a) == content_identity(b)
    b.train()  # modes and flags are not content
    b[0].weight.requires_grad_(False)
    assert content_identity(a) == content_identity(b)
    assert content_identity(a) != content_identity(tiny_net(1))
    with torch.no_grad():
        b[4].bias[0] += 1e-6
    assert content_identity(a) != content_identity(b)
    assert content_identity(nn.Linear(2, 2, bias=False).requires_grad_(False)) != content_identity(nn.Identity())
    # The weights part of stir.models.identity: a weights file's state dict hashes as the module's weights.
    from stir.models.identity import state_dict_identity

    assert state_dict_identity({k: v.clone() for k, v in a.state_dict().items()}) == state_dict_identity(a.state_dict())
    # The code is part of it (issue 30): the same weights under another activation are another model.
    other = copy.deepcopy(a)
    relus = [i for i, m in enumerate(other) if isinstance(m, nn.ReLU)]
    assert relus
    other[relus[0]] = nn.Tanh()
    assert state_dict_identity(other.state_dict()) == state_dict_identity(a.state_dict())
    assert content_identity(other) != content_identity(a)
