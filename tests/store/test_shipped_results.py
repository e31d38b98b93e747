"""Shipped results (zoo/store): copied unchanged on a miss, served only for their own key, never
trusted when unusable, and shipped write-once by ``python -m stir.zoo.ship_results``."""
import json

import pytest
import torch
from torch import nn

from stir import manifest
from stir.inversion import ExecutionConfig, InversionConfig
from stir.measure import CalibrationConfig, Estimator, evaluate_pair
from stir.store import STORE_VERSION, ResultStore
from stir.zoo.ship_results import main, ship_results

FAST = InversionConfig(mode="fast", steps=10, lr=0.05, seed=0)
FEW = CalibrationConfig(permutations=2, resamples=20)
QUIET = ExecutionConfig(warn_below=0.0)


def net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(48, 4))


@pytest.fixture(scope="module")
def images() -> torch.Tensor:
    return torch.rand(8, 3, 8, 8, generator=torch.Generator().manual_seed(3))


def pair(store, images, m1, m2, k=2):
    est = Estimator(k=k, iri="arbitrary", inversion=FAST, calibration=FEW)
    return evaluate_pair(m1, m2, images, "logits", "logits", est, run=QUIET, store=store)


def test_a_shipped_measurement_is_copied_unchanged_and_served_without_computing(tmp_path, images):
    m1, m2 = net(0), net(1)
    first = pair(ResultStore(tmp_path / "computed"), images, m1, m2)
    done = ship_results(tmp_path / "computed", tmp_path / "zoo" / "store")
    assert done.added == {"direction": 2, "similarity": 1} and not done.refused

    fresh = ResultStore(tmp_path / "fresh", shipped=tmp_path / "zoo" / "store")
    served = pair(fresh, images, m1, m2)
    assert (fresh.hits, fresh.shipped_hits, fresh.misses) == (3, 3, 0)
    assert served.get("m2|m1").stir.values == first.get("m2|m1").stir.values
    for kind in ("direction", "similarity"):  # byte-identical copies, provenance included
        for path in (tmp_path / "zoo" / "store" / kind).glob("*.json"):
            assert (tmp_path / "fresh" / kind / path.name).read_bytes() == path.read_bytes()

    # Another measurement (other models, or another k) has another key: computed, not served.
    other = ResultStore(tmp_path / "other", shipped=tmp_path / "zoo" / "store")
    pair(other, images, m1, net(2))
    pair(other, images, m1, m2, k=1)
    assert other.shipped_hits == 1 and other.misses == 5  # only the k-free similarity of (m1, m2) is shared


def test_an_unusable_shipped_entry_is_computed_here_and_left_in_place(tmp_path, images):
    m1, m2 = net(0), net(1)
    pair(ResultStore(tmp_path / "computed"), images, m1, m2)
    ship_results(tmp_path / "computed", tmp_path / "shipped")
    broken = next((tmp_path / "shipped" / "direction").glob("*.json"))
    broken.write_text("{ not json")
    manifest.write(tmp_path)  # shipped as it is on purpose: pinned (an unpinned edit is refused, test below)
    store = ResultStore(tmp_path / "fresh", shipped=tmp_path / "shipped")
    pair(store, images, m1, m2)
    assert store.shipped_hits == 2 and store.misses == 1
    assert broken.read_text() == "{ not json"  # a read-only store: nothing moved aside
    assert not list((tmp_path / "shipped" / "direction").glob("*.corrupt"))


def test_a_shipped_file_that_is_not_the_pinned_one_is_refused_before_anything_is_served(tmp_path, images):
    """zoo/store is pinned by zoo/MANIFEST.sha256 (stir.manifest): an edited entry, an entry the manifest
    does not list and a pinned entry that is missing each refuse, naming the file and the fix."""
    m1, m2 = net(0), net(1)
    pair(ResultStore(tmp_path / "computed"), images, m1, m2)
    ship_results(tmp_path / "computed", tmp_path / "zoo" / "store")
    assert (tmp_path / "zoo" / manifest.MANIFEST).is_file()  # shipping pins what it wrote
    edited = next((tmp_path / "zoo" / "store" / "direction").glob("*.json"))
    original = edited.read_text()
    entry = json.loads(original)
    entry["result"]["stir"]["mean"] = 0.938
    edited.write_text(json.dumps(entry))
    store = ResultStore(tmp_path / "fresh", shipped=tmp_path / "zoo" / "store")
    with pytest.raises(manifest.ManifestError, match=rf"{edited.name} has sha256 .* it was edited; restore it .*"
                                                     r"python -m stir.zoo.manifest --write"):
        pair(store, images, m1, m2)
    assert not (tmp_path / "fresh" / "direction").exists()  # nothing served, nothing copied
    edited.write_text(original)
    extra = edited.with_name("0" * 64 + ".json")
    extra.write_text(original)
    with pytest.raises(manifest.ManifestError, match="is not in .*MANIFEST.sha256"):
        pair(ResultStore(tmp_path / "fresh2", shipped=tmp_path / "zoo" / "store"), images, m1, m2)
    extra.unlink()
    edited.unlink()
    with pytest.raises(manifest.ManifestError, match="is pinned by .* but missing"):
        pair(ResultStore(tmp_path / "fresh3", shipped=tmp_path / "zoo" / "store"), images, m1, m2)


def test_the_committed_manifest_pins_every_shipped_file():
    """zoo/MANIFEST.sha256 matches zoo/models and zoo/store as committed: shipping without pinning
    (or an edit) fails here. The fix: python -m stir.zoo.manifest --write."""
    from stir.zoo.shipped import DEFAULT_DIR

    for part in manifest.PARTS:
        manifest.verify(DEFAULT_DIR, part)


def test_shipped_results_of_another_store_version_are_not_used(tmp_path, images, caplog):
    m1, m2 = net(0), net(1)
    pair(ResultStore(tmp_path / "computed"), images, m1, m2)
    ship_results(tmp_path / "computed", tmp_path / "shipped")
    (tmp_path / "shipped" / "VERSION").write_text(f"{STORE_VERSION - 1}\n")
    store = ResultStore(tmp_path / "fresh", shipped=tmp_path / "shipped")
    with caplog.at_level("WARNING"):
        pair(store, images, m1, m2)
    assert store.shipped_hits == 0 and store.misses == 3
    assert sum("are not used" in r.getMessage() for r in caplog.records) == 1  # said once, not per entry


def test_shipping_is_write_once(tmp_path, images):
    m1, m2 = net(0), net(1)
    pair(ResultStore(tmp_path / "a"), images, m1, m2)
    ship_results(tmp_path / "a", tmp_path / "shipped")
    before = {p: p.read_bytes() for p in (tmp_path / "shipped").rglob("*.json")}
    again = ship_results(tmp_path / "a", tmp_path / "shipped")
    assert again.added == {} and again.present == {"direction": 2, "similarity": 1}
    # A recomputation whose value differs (another host's rounding): the first shipped entry stays.
    path = next((tmp_path / "a" / "similarity").glob("*.json"))
    entry = json.loads(path.read_text())
    entry["result"]["value"] = entry["result"]["value"] + 1e-9
    path.write_text(json.dumps(entry))
    third = ship_results(tmp_path / "a", tmp_path / "shipped")
    assert third.differing == {"similarity": 1} and "kept as first shipped" in third.line()
    assert {p: p.read_bytes() for p in (tmp_path / "shipped").rglob("*.json")} == before


def test_a_measurement_with_more_readings_supersedes_its_older_entry_only_when_asked(tmp_path, images):
    """An entry stored before a reading existed (here: without the chance-corrected STIR) is replaced
    by the same key's entry that has it, only with --supersede-older-readings; an entry that lacks a
    field the shipped one has, or differs with the same fields, is never replaced."""
    from stir.zoo.ship_results import has_more_readings

    m1, m2 = net(0), net(1)
    pair(ResultStore(tmp_path / "a"), images, m1, m2)
    ship_results(tmp_path / "a", tmp_path / "shipped")
    shipped = next((tmp_path / "shipped" / "direction").glob("*.json"))
    old = json.loads(shipped.read_text())
    for cal in old["result"]["calibration"].values():  # as stored before the reading was added
        for name in ("chance_corrected", "chance_corrected_low", "chance_corrected_high"):
            del cal[name]
    shipped.write_text(json.dumps(old))
    assert has_more_readings(json.loads((tmp_path / "a" / "direction" / shipped.name).read_text())["result"], old["result"])
    assert ship_results(tmp_path / "a", tmp_path / "shipped").differing == {"direction": 1}  # not asked: kept
    assert shipped.read_text() == json.dumps(old)
    main([str(tmp_path / "a"), "--into", str(tmp_path / "shipped"), "--supersede-older-readings"])
    assert shipped.read_bytes() == (tmp_path / "a" / "direction" / shipped.name).read_bytes()
    assert not has_more_readings(old["result"], json.loads(shipped.read_text())["result"])  # fewer fields: never
    same_fields = json.loads(shipped.read_text())
    same_fields["result"]["k"] = 3
    assert not has_more_readings(same_fields["result"], json.loads(shipped.read_text())["result"])


def test_bad_input_is_one_line_and_exit_status_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as err:
        main([str(tmp_path / "nowhere"), "--into", str(tmp_path / "shipped")])
    assert err.value.code == 2
    first = capsys.readouterr().err.strip().splitlines()[0]  # the error; a second line says how to see the trace
    assert first.startswith("error: ") and "is not a results store folder" in first
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "VERSION").write_text("3\n")
    with pytest.raises(SystemExit) as err:
        main([str(tmp_path / "old"), "--into", str(tmp_path / "shipped")])
    assert err.value.code == 2 and "rerun its evaluation" in capsys.readouterr().err
    assert not (tmp_path / "shipped").exists()


def test_the_evaluation_reads_zoo_store_unless_told_not_to(tmp_path):
    from stir.experiments.context import _shipped_store
    from stir.experiments.schema import ZooConfig

    assert _shipped_store(ZooConfig(), tmp_path) == tmp_path / "zoo" / "store"
    assert _shipped_store(ZooConfig(shipped_dir="/elsewhere"), tmp_path).as_posix() == "/elsewhere/store"
    assert _shipped_store(ZooConfig(shipped_results=False), tmp_path) is None
    assert _shipped_store(ZooConfig(shipped_dir=None), tmp_path) is None


def test_help_lists_no_shipped_entry_that_is_not_the_pinned_file(tmp_path):
    """--help's list of shipped models reads zoo/models: an edited accuracy (0.999) is not shown as the
    model's; the entry says it is not served."""
    import shutil

    from stir.experiments.commands import shipped_zoo
    from stir.zoo.shipped import DEFAULT_DIR

    models = tmp_path / "zoo" / "models"
    models.mkdir(parents=True)
    for entry in sorted((DEFAULT_DIR / "models").glob("vanilla_paper*.json"))[:2]:
        shutil.copy(entry, models / entry.name)
    manifest.write(tmp_path / "zoo")
    assert all("accuracy" in line for _, line in shipped_zoo(tmp_path))
    edited = sorted(models.glob("*.json"))[0]
    record = json.loads(edited.read_text())
    record["test"]["test/acc"] = 0.999
    edited.write_text(json.dumps(record))
    lines = dict(shipped_zoo(tmp_path))
    assert lines[edited.stem].startswith("not served: not the file zoo/MANIFEST.sha256 pins")
    assert "0.999" not in " ".join(lines.values())
