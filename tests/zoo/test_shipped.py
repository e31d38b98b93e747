"""The shipped zoo (stir.zoo.shipped, python -m stir.zoo.ship): tiny trained runs shipped into a tmp zoo
folder, resolved by name with no run folder, measured through the real evaluate.py; refusals."""
import json
import re
import shutil
from pathlib import Path

import pytest
import torch

from conftest import REPO, refused, run_entry_point, tiny_train_args
from stir.config.schema import DataConfig
from stir.training.runs import RunFolder, recipe_of
from stir.zoo import MissingModelError, Recipes, Zoo
from stir.zoo.ship import main as ship_main
from stir.zoo.ship import ship
from stir.zoo.shipped import DTYPES, ShippedModelError, ShippedZoo, recipe_identity

PROFILE = "laptop"


def tiny(data_root: Path) -> list:
    """The tiny overrides without runs_dir: what train.py, the ship command and the zoo recipes share."""
    return [a for a in tiny_train_args(data_root, Path("unused")) if not a.startswith("runs_dir=")]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, cifar10_root):
    """Two tiny finished runs of the zoo recipes vanilla and vanilla_s1 at profile=laptop, shipped into a tmp zoo."""
    root = tmp_path_factory.mktemp("shipped")
    mp = pytest.MonkeyPatch()
    try:
        for seed in (0, 1):
            run_entry_point("train", [f"profile={PROFILE}", "loss=vanilla", f"seed={seed}", *tiny(cifar10_root),
                                      f"runs_dir={root / 'runs'}"], mp)
    finally:
        mp.undo()
    runs = sorted(p for p in (root / "runs/cifar10").glob("resnet18-w4/vanilla-fast/seed*") if p.is_dir())
    assert [r.name for r in runs] == ["seed0", "seed1"]
    zoo = root / "zoo"
    entries = [ship(run, name, PROFILE, zoo, overrides=tiny(cifar10_root))
               for run, name in zip(runs, ("vanilla", "vanilla_s1"))]
    return root, runs, zoo, entries


def recipes(data_root: Path, runs_dir: Path, *extra: str) -> Recipes:
    return Recipes(REPO / "configs/zoo.yaml", REPO / "configs", profile=PROFILE, overrides=[*tiny(data_root), *extra],
                   runs_dir=str(runs_dir))


def zoo_of(data_root: Path, runs_dir: Path, shipped, *extra: str, train_missing: bool = False) -> Zoo:
    return Zoo(recipes(data_root, runs_dir, *extra), data=DataConfig(), shipped=shipped, train_missing=train_missing)


def test_a_shipped_model_is_a_plain_float32_state_dict_with_its_record(trained):
    root, runs, zoo, (entry, _) = trained
    assert entry.weights == zoo / "weights" / f"vanilla-{PROFILE}-{entry.sha256[:12]}.pt"
    state = torch.load(entry.weights, weights_only=True)
    assert all(isinstance(v, torch.Tensor) for v in state.values()) and "stem.0.weight" in state
    assert all(v.dtype == torch.float32 for v in state.values() if v.is_floating_point())
    record = entry.record
    metrics = json.loads((runs[0] / "metrics.json").read_text())
    assert record["test"]["test/acc"] == metrics["test/acc"] and "test/robust_acc" in record["test"]
    assert record["recipe"] == json.loads((runs[0] / "recipe.json").read_text())["recipe"]
    assert record["recipe_sha256"] == recipe_identity(record["recipe"])
    assert record["model"] == {"arch": "resnet18", "width": 4} and record["parameters"] > 0
    assert [row["epoch"] for row in record["curve"]] == [0] and "train/epoch_loss" in record["curve"][0]
    assert record["train_wall_s"] is not None and record["robust_attack"]["eps"] == 1.0
    assert record["trained_with"]["torch"] and record["shipped_with"]["stir-lab"]


def test_a_zoo_name_without_a_run_folder_resolves_to_the_shipped_model(trained, cifar10_root, tmp_path):
    root, runs, zoo, (entry, _) = trained
    model = zoo_of(cifar10_root, tmp_path / "no-runs", ShippedZoo(zoo)).model("vanilla")
    assert model.record["source"] == "shipped" and model.record["shipped_sha256"] == entry.sha256
    assert model.metrics["test/acc"] == entry.metrics["test/acc"] and model.train.model.width == 4
    local = zoo_of(cifar10_root, root / "runs", None).model("vanilla")
    assert model.identity == local.identity  # the same weights: the results store serves both alike


def test_a_finished_local_run_of_the_recipe_wins_over_the_shipped_model(trained, cifar10_root):
    root, runs, zoo, _ = trained
    model = zoo_of(cifar10_root, root / "runs", ShippedZoo(zoo)).model("vanilla")
    assert model.record["source"] == "zoo" and model.record["run_dir"] == str(runs[0])


def test_a_shipped_model_of_another_recipe_is_not_served_and_the_refusal_says_why(trained, cifar10_root, tmp_path):
    _, _, zoo, _ = trained
    with pytest.raises(MissingModelError, match=r"no shipped model fits: .*vanilla-laptop-.*optim.lr: 0.2 -> 0.1"):
        zoo_of(cifar10_root, tmp_path / "no-runs", ShippedZoo(zoo), "optim.lr=0.1").model("vanilla")


def test_a_retrained_model_has_the_shipped_recipe_identity(trained, cifar10_root, tmp_path):
    """train_missing=true without the shipped zoo retrains the name from its recipe: the same recipe identity."""
    _, _, _, (entry, _) = trained
    model = zoo_of(cifar10_root, tmp_path / "retrained", None, train_missing=True).model("vanilla")
    folder = RunFolder(Path(model.record["run_dir"]))
    assert folder.finished
    assert recipe_identity(folder.stored_recipe()) == entry.recipe_sha256
    assert recipe_identity(recipe_of(model.train)) == entry.recipe_sha256


def test_evaluate_measures_the_shipped_pair_on_a_fresh_clone(trained, cifar10_root, tmp_path, monkeypatch):
    _, _, zoo, entries = trained
    overrides = ",".join(f'"{o}"' for o in tiny(cifar10_root))
    run_entry_point("evaluate", [
        "ref=vanilla", "target=vanilla_s1", f"zoo.profile={PROFILE}", f"zoo.shipped_dir={zoo}",
        f"zoo.overrides=[{overrides}]", f"zoo.runs_dir={tmp_path / 'runs'}", f"out_dir={tmp_path / 'results'}",
        "n=12", "k=2", "inversion.steps=15", "inversion.tolerance=0.05", "min_fraction_iri=0", "iri_grid_images=4",
        "calibration.permutations=4", "calibration.resamples=50", "logger.wandb.mode=disabled"], monkeypatch)
    assert not (tmp_path / "runs").exists()  # nothing trained
    record = tmp_path / "results/pair_vanilla_vs_vanilla_s1@laptop/record.json"  # the link to the newest report
    models = json.loads(record.read_text())["config"]["models"]
    for label, entry in zip(("vanilla", "vanilla_s1"), entries):
        assert models[label]["source"] == "shipped" and models[label]["shipped_sha256"] == entry.sha256
        assert models[label]["shipped_file"].endswith(entry.weights.name)
    notes = json.loads(record.read_text())["notes"]
    assert any(n.startswith("model vanilla: the shipped ") and entries[0].sha256[:12] in n for n in notes), notes


def test_an_edited_shipped_result_or_entry_is_refused_by_evaluate_not_served(trained, cifar10_root, tmp_path,
                                                                               monkeypatch, capsys):
    """Issue 54, High 1: a shipped result edited to 0.938 (outside its own interval) was served and
    copied into the user's store; an edited test/acc fed --help and the claims. zoo/MANIFEST.sha256
    pins both (stir.manifest): evaluate.py refuses in one line naming the file, before serving any."""
    from stir.zoo.ship_results import ship_results

    _, _, zoo, _ = trained
    mine = tmp_path / "zoo"
    shutil.copytree(zoo, mine)
    overrides = ",".join(f'"{o}"' for o in tiny(cifar10_root))
    args = ["ref=vanilla", "target=vanilla_s1", f"zoo.profile={PROFILE}", f"zoo.shipped_dir={mine}",
            f"zoo.overrides=[{overrides}]", f"zoo.runs_dir={tmp_path / 'runs'}", "n=12", "k=2", "inversion.steps=5",
            "min_fraction_iri=0", "iri_grid_images=4", "calibration.permutations=4", "calibration.resamples=20",
            "logger.wandb.mode=disabled"]
    run_entry_point("evaluate", [*args, f"out_dir={tmp_path / 'computed'}"], monkeypatch)
    assert ship_results(tmp_path / "computed" / "store", mine / "store").added["direction"] == 2
    path = next((mine / "store" / "direction").glob("*.json"))
    original = path.read_text()
    entry = json.loads(original)
    entry["result"]["stir"]["mean"] = entry["result"]["calibration"]["stir"]["value"] = 0.938
    path.write_text(json.dumps(entry))
    message = refused("evaluate", [*args, f"out_dir={tmp_path / 'fresh'}"], monkeypatch, capsys)
    assert path.name in message and "it was edited" in message and "python -m stir.zoo.manifest --write" in message
    assert not list((tmp_path / "fresh" / "store").glob("*/*.json"))  # nothing served, nothing copied

    path.write_text(original)
    model_entry = next((mine / "models").glob("vanilla-*.json"))
    record = json.loads(model_entry.read_text())
    record["test"]["test/acc"] = 0.999
    model_entry.write_text(json.dumps(record))
    message = refused("evaluate", [*args, f"out_dir={tmp_path / 'fresh'}"], monkeypatch, capsys)
    assert model_entry.name in message and "it was edited" in message


def test_shipped_dir_null_turns_the_shipped_models_off(tmp_path):
    from stir.experiments.config import ZooConfig
    from stir.experiments.context import _shipped_zoo

    assert ZooConfig().shipped_dir == "zoo" and _shipped_zoo("zoo", tmp_path).folder == tmp_path / "zoo"
    assert _shipped_zoo(None, tmp_path) is None


def test_a_weights_file_that_is_not_its_entry_s_is_refused_in_one_line(trained, cifar10_root, tmp_path, monkeypatch,
                                                                       capsys):
    _, _, zoo, (entry, _) = trained
    bad = tmp_path / "zoo"
    shutil.copytree(zoo, bad)
    weights = bad / "weights" / entry.weights.name
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ShippedModelError, match=r"has sha256 .*, not the .* its entry vanilla-laptop-.*json records"):
        zoo_of(cifar10_root, tmp_path / "no-runs", ShippedZoo(bad)).model("vanilla")
    overrides = ",".join(f'"{o}"' for o in tiny(cifar10_root))
    message = refused("evaluate", ["ref=vanilla", "target=vanilla_s1", f"zoo.profile={PROFILE}", f"zoo.shipped_dir={bad}",
                                   f"zoo.overrides=[{overrides}]", f"zoo.runs_dir={tmp_path / 'runs'}",
                                   f"out_dir={tmp_path / 'results'}", "n=12", "logger.wandb.mode=disabled"],
                      monkeypatch, capsys)
    assert "sha256" in message and entry.weights.name in message


def ship_refused(args, capsys) -> str:
    """``python -m stir.zoo.ship *args`` must refuse with exit status 2 and one line; returns it."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        ship_main([str(a) for a in args])
    err = capsys.readouterr().err.strip().splitlines()
    assert done.value.code == 2 and err[0].startswith("error: ") and len(err) == 2, err
    return err[0]


def override_args(data_root: Path) -> list:
    return [w for o in tiny(data_root) for w in ("--override", o)]


def test_a_float16_model_is_half_the_bytes_and_states_the_accuracy_it_has(trained, cifar10_root, tmp_path):
    """--dtype float16: the stored model computes other logits than the run, so its accuracy is
    measured again (the run's own stays beside it) and the zoo serves it as what it computes."""
    from stir.models import build, channel_stats
    from stir.zoo import checkpoints
    from stir.zoo.ship import remeasure

    _, runs, _, (full, _) = trained
    cfg = recipes(cifar10_root, tmp_path / "no-runs").train_config("vanilla")
    # the re-measure is the run's own measurement: on the run's network it gives the run's test accuracy
    assert remeasure(cfg, checkpoints.network(runs[0], cfg))["test/acc"] == full.metrics["test/acc"]
    half = ship(runs[0], "vanilla", PROFILE, tmp_path / "zoo", overrides=tiny(cifar10_root), dtype="float16")
    state = half.state_dict()
    assert all(v.dtype == torch.float16 for v in state.values() if v.is_floating_point())
    assert half.record["dtype"] == "float16" and half.sha256 != full.sha256
    assert half.record["bytes"] < 0.6 * full.record["bytes"]
    assert half.record["test_of_run"] == full.metrics and "test/robust_acc" in half.metrics
    assert abs(half.metrics["test/acc"] - full.metrics["test/acc"]) <= 0.005
    assert "logits differ by up to" in half.record["probe_logits"]
    net = build(cfg.model, cfg.data.num_classes, *channel_stats(cfg.data.name))
    net.load_state_dict(state)  # float16 values into float32 parameters
    assert all(p.dtype == torch.float32 for p in net.parameters())
    model = zoo_of(cifar10_root, tmp_path / "no-runs", ShippedZoo(tmp_path / "zoo")).model("vanilla")
    assert model.record["shipped_sha256"] == half.sha256 and model.metrics == half.metrics
    local = zoo_of(cifar10_root, trained[0] / "runs", None).model("vanilla")
    assert model.identity != local.identity  # another function: the results store keeps the two apart
    with pytest.raises(ValueError, match=r"loses .* test accuracy .* more than --max-acc-drop -1.0; ship it as float32"):
        ship(runs[0], "vanilla", PROFILE, tmp_path / "zoo2", overrides=tiny(cifar10_root), dtype="float16", max_acc_drop=-1.0)
    assert not (tmp_path / "zoo2").exists()


def test_an_int8_model_is_a_quarter_of_the_bytes_and_is_served_as_it_computes(trained, cifar10_root, tmp_path):
    """--dtype int8: weights quantized per output channel (stir.zoo.quantize); the zoo loads the
    dequantized float32 weights, which are the stored model, measured again when shipped."""
    from stir.zoo.quantize import SCALE_SUFFIX, dequantize

    _, runs, _, (full, _) = trained
    small = ship(runs[0], "vanilla", PROFILE, tmp_path / "zoo", overrides=tiny(cifar10_root), dtype="int8")
    stored = small.stored_tensors()
    assert stored["stem.0.weight"].dtype == torch.int8 and stored["stem.0.weight" + SCALE_SUFFIX].dtype == torch.float32
    assert small.record["dtype"] == "int8" and small.sha256 != full.sha256
    assert small.record["bytes"] < 0.5 * full.record["bytes"]  # width 4: the zip headers weigh; 0.27 at width 16
    assert small.record["test_of_run"] == full.metrics and "test/robust_acc" in small.metrics
    assert "dequantized" in small.record["remeasured"]
    state = small.state_dict()  # what a network loads: float32, every key of the run's state dict
    original = torch.load(full.weights, weights_only=True)
    assert set(state) == set(original) and all(state[k].dtype == original[k].dtype for k in state)
    again = dequantize(stored)
    assert all(torch.equal(state[k], again[k]) for k in state)
    # within half a quantization step of the run's weights, channel by channel
    w, q, scale = original["stem.0.weight"], stored["stem.0.weight"], stored["stem.0.weight" + SCALE_SUFFIX]
    assert torch.all((state["stem.0.weight"] - w).abs() <= scale.view(-1, 1, 1, 1) / 2 + 1e-7)
    assert q.abs().amax().item() == 127
    model = zoo_of(cifar10_root, tmp_path / "no-runs", ShippedZoo(tmp_path / "zoo")).model("vanilla")
    assert model.record["shipped_sha256"] == small.sha256 and model.metrics == small.metrics
    loaded = model.module.state_dict()
    assert all(torch.equal(loaded[k], state[k]) for k in state)  # the zoo serves the dequantized weights


def test_shipping_never_overwrites_a_file(trained, cifar10_root, capsys, monkeypatch):
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    _, runs, zoo, (entry, _) = trained
    before = entry.weights.stat().st_mtime_ns
    line = ship_refused([runs[0], "--name", "vanilla", "--profile", PROFILE, "--zoo-dir", zoo,
                         *override_args(cifar10_root)], capsys)
    assert "exists: shipped files are never rewritten" in line and entry.weights.stat().st_mtime_ns == before


@pytest.mark.parametrize("damage, name, message", [
    ("metrics.json", "vanilla", r"is not a finished run .*has no metrics.json"),
    ("csv", "vanilla", r"has no training curve"),
    (None, "at", r"holds another recipe than zoo model 'at' at profile=laptop \(loss.name: 'vanilla' -> 'at'\)"),
    (None, "nosuchname", r"unknown zoo name 'nosuchname'"),
])
def test_an_unshippable_run_is_one_line_and_exit_2(trained, cifar10_root, tmp_path, capsys, monkeypatch, damage, name,
                                                    message):
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    _, runs, _, _ = trained
    run = tmp_path / "run"
    shutil.copytree(runs[0], run)
    if damage is not None:
        target = run / damage
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    line = ship_refused([run, "--name", name, "--profile", PROFILE, "--zoo-dir", tmp_path / "zoo",
                         *override_args(cifar10_root)], capsys)
    assert re.search(message, line), line
    assert not (tmp_path / "zoo").exists()


def test_the_repository_s_shipped_models_are_intact():
    """Every entry of the repository's zoo/ reads, names a zoo name, and its weights have its sha256."""
    shipped = ShippedZoo()
    names = set(Recipes(REPO / "configs/zoo.yaml", REPO / "configs").recipes)
    total = 0
    for entry in shipped.entries():
        assert entry.name in names, entry.entry
        assert entry.entry.stem == f"{entry.name}-{entry.profile}-{entry.sha256[:12]}"
        assert entry.weights.name == f"{entry.entry.stem}.pt"
        stored = entry.stored_tensors()  # checks the sha256
        if entry.record["dtype"] == "int8":  # weights int8 with float32 scales, the rest float32
            assert any(v.dtype == torch.int8 for v in stored.values()), entry.entry
            assert all(v.dtype == torch.float32 for v in stored.values() if v.is_floating_point()), entry.entry
        else:
            assert all(v.dtype == DTYPES[entry.record["dtype"]] for v in stored.values() if v.is_floating_point())
        if entry.record["dtype"] != "float32":  # a reduced-precision model states its own accuracy beside the run's
            assert entry.record["test_of_run"]["test/acc"] - entry.metrics["test/acc"] <= 0.005, entry.entry
        total += entry.weights.stat().st_size
    # The issue's budget for all shipped weights together is "about 100 MB": 101 MB held figure 1's chains
    # and claim 12's third training seed; claim 11's nine architecture models (ResNet34, VGG16, VGG19 at
    # three seeds, int8: 11.2 MB) take it to 112.0 MB, and their AT twins (resnet34_at, vgg16_at, vgg19_at at
    # three seeds, int8: 11.2 MB more) to 123.2 MB when all are shipped: claim 11 compares model families, which
    # needs three seeds of each, and the issue asks for that too. Claim 12's VGG16 setting (vgg16_trades,
    # vgg16_mart, int8: 1.9 MB) takes it to 125.1 MB, Table 2's 10-step AT (at_it10) to 125.9 MB and claim 12's
    # trades_b01 (beta 0.1) to 126.7 MB; the rest of claim 12's beta 0.1 setting (mart_b01, vgg16_trades_b01,
    # vgg16_mart_b01) to 129.4 MB. Claim 7's graded-robustness family (issue 52: at_e025 at three seeds) is
    # float32 (8.6 MB): its first seed was measured from its run folder's float weights, and an int8 copy is
    # another model (another identity), so a fresh clone re-measured the graded cells; 137.9 MB with all three.
    # Decisions stated in the issues' notes; more is one too.
    assert total < 138.5e6


def test_training_time_and_curve_of_a_resumed_run(tmp_path):
    """Two attempts (the second resumed): their spans are summed; a later attempt's epoch replaces an earlier one's."""
    from stir.zoo.shipped import training_curve, training_wall_s

    line = "[2026-12-01 {}][stir.training.pipeline][INFO] - /runs/x/seed0: resnet18 width 16, 0.70M parameters, vanilla"
    epoch = "[2026-12-01 {}][stir.training.trainer][INFO] - epoch 1 of 15: train/epoch_loss 1.9 (81 s)"
    (tmp_path / "train.log").write_text("\n".join([
        line.format("10:00:00,000"), epoch.format("10:01:30,500"), "a traceback line without a time stamp",
        line.format("11:00:00,000"), epoch.format("11:02:00,000"), "[2026-12-01 11:03:00,000][x][INFO] - finished"]))
    assert training_wall_s(tmp_path) == pytest.approx(90.5 + 180.0)
    assert training_wall_s(tmp_path / "nothing") is None
    # Stopped (SIGTERM), resumed an hour later: Lightning's setup line just before the network line
    # is the new attempt's, so the idle hour is not counted (it was, up to stop 40).
    setup = "[2026-12-01 {}][lightning.pytorch.utilities.rank_zero][INFO] - GPU available: False, used: False"
    stop = "[2026-12-01 {}][lightning.pytorch.trainer.connectors.signal_connector][INFO] - Received SIGTERM: 15"
    (tmp_path / "train.log").write_text("\n".join([
        setup.format("09:59:59,000"), line.format("10:00:00,000"), epoch.format("10:01:30,500"),
        stop.format("10:02:00,000"), setup.format("11:00:00,000"), line.format("11:00:00,002"),
        epoch.format("11:02:00,000")]))
    assert training_wall_s(tmp_path) == pytest.approx(121.0 + 120.0)
    header = "epoch,step,train/loss,train/epoch_loss,val/acc\n"
    for version, rows in ((0, "0,10,2.0,,\n0,10,,1.9,0.3\n1,20,,1.5,0.4\n"), (1, "1,20,,1.4,0.45\n2,30,,1.2,0.5\n")):
        folder = tmp_path / f"csv/version_{version}"
        folder.mkdir(parents=True)
        (folder / "metrics.csv").write_text(header + rows)
    assert training_curve(tmp_path) == [{"epoch": 0, "train/epoch_loss": 1.9, "val/acc": 0.3},
                                        {"epoch": 1, "train/epoch_loss": 1.4, "val/acc": 0.45},
                                        {"epoch": 2, "train/epoch_loss": 1.2, "val/acc": 0.5}]


def test_a_model_trained_on_a_local_copy_is_served_for_that_data_by_content(tmp_path, monkeypatch):
    """As the laptop zoo is trained (data.source=a tar): served when the evaluation gives the same data
    (data.source, any path with that content), refused with the fix when it gives none."""
    from stir.data import synthetic

    source = tmp_path / "c10.tar.gz"
    synthetic.write_image_tar(source, n_train=60, n_test=20, seed=0)
    common = [*tiny(tmp_path / "cache"), "data.holdout_size=20"]
    run_entry_point("train", [f"profile={PROFILE}", "loss=vanilla", *common, f"data.source={source}",
                              f"runs_dir={tmp_path / 'runs'}"], monkeypatch)
    (run,) = [p for p in (tmp_path / "runs/cifar10").glob("*/*/seed0") if p.is_dir()]
    entry = ship(run, "vanilla", PROFILE, tmp_path / "zoo", overrides=common)
    assert entry.record["trained_on"] == str(source)
    moved = tmp_path / "elsewhere/copy.tar.gz"
    moved.parent.mkdir()
    shutil.copy(source, moved)
    model = zoo_of(tmp_path / "cache", tmp_path / "no-runs", ShippedZoo(tmp_path / "zoo"), "data.holdout_size=20",
                   f"data.source={moved}").model("vanilla")
    assert model.record["source"] == "shipped" and model.data.source == str(moved)
    with pytest.raises(MissingModelError, match=rf"trained on {source}: give the same data with data.source=PATH"):
        zoo_of(tmp_path / "cache", tmp_path / "no-runs", ShippedZoo(tmp_path / "zoo"), "data.holdout_size=20").model("vanilla")
