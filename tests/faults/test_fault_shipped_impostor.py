"""Issue 67, item 2 on a fresh clone: the shipped models' fingerprints (zoo/fingerprints) hold what each
computed on the run's own images too (the first two images of X of the shipped presets), so a shipped
model is checked on them before its shipped results are served, not trusted on first use. An impostor
of a shipped model (its weights and code, the static identity unchanged, but a global hook that changes
its penultimate features on natural images only: honest on the synthetic probes) was served the shipped
results the first time; it is now a behaviour variant, and nothing shipped is served for it."""
import dataclasses

import pytest
import torch

import behaviour_nets as nets
from conftest import REPO
from stir.models.taps import tap_point
from stir.store import NotStored

DATA_COPY = REPO.parent / "shared" / "data" / "cifar10-jpg.tar.gz"


@pytest.fixture
def tour(tmp_path):
    """The README tour's first pair through the library's real context (nothing in the results folder:
    a fresh clone), its store read-only (a result it does not hold raises NotStored, never measured)."""
    from stir.experiments.library import open_evaluation

    ctx = open_evaluation(f"ref=vanilla target=vanilla_s1 profile=laptop data.source={DATA_COPY}",
                          f"out_dir={tmp_path / 'results'}", "logger.wandb.mode=disabled", "device=cpu")
    return dataclasses.replace(ctx, store=ctx.store.as_read_only())


def natural_rows_changed(model):
    """A global forward hook (no part of the model's static identity: weights, buffers, code) that
    scales the penultimate features of natural images (``behaviour_nets.natural``) by 1.5; its handle."""
    net = model.module
    point = tap_point(net, "penultimate")
    pool = dict(net.named_modules()).get(point.module) or next(m for n, m in net.named_modules()
                                                               if n.endswith(point.module))
    seen = {}

    def hook(module, args, output):
        if module is net:
            return None
        if "rows" not in seen or seen["rows"].shape[0] != output.shape[0]:
            return None
        mask = seen["rows"].to(output.device).view(-1, *[1] * (output.dim() - 1))
        return torch.where(mask, output * 1.5, output) if module is pool else None

    def pre(module, args):
        if module is net:
            seen["rows"] = nets.natural(args[0].detach())

    handles = [torch.nn.modules.module.register_module_forward_pre_hook(pre),
               torch.nn.modules.module.register_module_forward_hook(hook)]
    return handles


@pytest.mark.skipif(not DATA_COPY.is_file(), reason="the shipped zoo is served for the project's CIFAR-10 copy only")
def test_a_natural_image_impostor_of_a_shipped_model_is_not_served_the_shipped_results(tour):
    """The impostor first, in a fresh results folder (nothing local to compare it with: only what is shipped)."""
    m1, m2 = tour.role("ref"), tour.role("target")
    x = tour.images(m1)
    assert nets.natural(x[:2]).all() and not nets.natural(torch.rand(4, 3, 32, 32)).any()
    handles = natural_rows_changed(m1)
    try:
        assert tour.identity(m1, "penultimate") != m1.identity  # a behaviour variant of the shipped model
        with pytest.raises(NotStored):  # not served: it would be measured
            tour.pair(m1, m2)
    finally:
        for h in handles:
            h.remove()
    assert tour.store.shipped_hits == 0

    m1, m2 = tour.role("ref"), tour.role("target")  # loaded again: a new process's modules, honest
    honest = tour.pair(m1, m2)  # served: the shipped fingerprints hold both keys of both models
    assert tour.store.shipped_hits == 3 and tour.identity(m1, "penultimate") == m1.identity
    assert honest.get("m2|m1").stir is not None


def test_ship_results_ships_the_keys_the_shipped_fingerprints_lack_and_changes_no_shipped_one(tmp_path):
    """python -m stir.zoo.ship_results STORE ships the store's fingerprints beside its results: the first
    behaviour at each key the shipped file lacks; a key shipped already is kept as it was; all pinned."""
    from stir import manifest
    from stir.models.behaviour import Fingerprints
    from stir.untrusted import load_plain
    from stir.zoo.ship_results import ship_fingerprints

    def fp(v):
        return {"logits": torch.full((6, 20), float(v), dtype=torch.float64)}

    zoo = tmp_path / "zoo"
    shipped = Fingerprints(zoo / "fingerprints")
    shipped.variant("m", "3x32x32|logits", fp(1))
    manifest.write(zoo)
    local = Fingerprints(tmp_path / "out" / "store" / "fingerprints", shipped=zoo / "fingerprints")
    assert local.variant("m", "3x32x32|logits", fp(1)) == (0, None)  # served by the shipped key: nothing local
    assert local.variant("m", "3x32x32|logits", fp(2))[0] == 1  # another behaviour: local variant 1
    assert local.variant("m", "3x32x32|logits|run:ab|vjp", fp(3)) == (0, None)
    assert local.variant("m", "3x32x32|logits|run:ab|vjp", fp(4))[0] == 1
    assert ship_fingerprints(tmp_path / "out" / "store", zoo / "fingerprints") == {"files": 1, "keys": 1}
    data = load_plain(zoo / "fingerprints" / "m.pt")
    assert sorted(data) == ["3x32x32|logits", "3x32x32|logits|run:ab|vjp"]
    assert [float(f["logits"][0, 0]) for f in data["3x32x32|logits"]] == [1.0]  # the shipped key unchanged
    assert [float(f["logits"][0, 0]) for f in data["3x32x32|logits|run:ab|vjp"]] == [3.0]  # variant 0 only
    manifest.verify(zoo, "fingerprints")  # pinned
