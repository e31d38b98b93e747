"""One evaluation path for every model (issue 19): checkpoint paths make a readable report, and the
G-EED and stitching kinds take models of other sources, through the real entry point."""
import csv
import json
import re
from pathlib import Path

import pytest
import torch

import source_nets
from conftest import run_entry_point, tiny_train_args

FACTORY = "python:source_nets:functional_head"
QUICK = ["n=8", "k=1", "inversion.steps=4", "inversion.record_steps=[2]", "iri_grid_images=2",
         "calibration.permutations=2", "calibration.resamples=20", "logger.wandb.mode=disabled", "iri=arbitrary"]


def rows(path: Path) -> list:
    return list(csv.DictReader(open(path)))


def test_a_pair_of_two_checkpoint_paths_writes_a_report_without_paths_in_its_file_names(cifar10_root, tmp_path, monkeypatch):
    for seed in (0, 1):
        run_entry_point("train", tiny_train_args(cifar10_root, tmp_path / "runs", f"seed={seed}"), monkeypatch)
    run = tmp_path / "runs/cifar10/resnet18-w4/vanilla"
    run_entry_point("evaluate", [f"ref={run / 'seed0/last.ckpt'}", f"target={run / 'seed1/last.ckpt'}",
                                 f"out_dir={tmp_path / 'results'}", *QUICK], monkeypatch)
    (out,) = [p for p in (tmp_path / "results").iterdir() if p.is_dir() and p.name.startswith("pair_") and not p.is_symlink()]
    assert out.name.startswith("pair_vanilla-seed0_vs_vanilla-seed1-")  # the recipe part of each path
    files = [p.name for p in out.iterdir()]
    assert not [f for f in files if ":" in f] and all(p.parent == out for p in out.rglob("*.png"))
    readme = (out / "README.md").read_text()
    links = re.findall(r"\]\(([^)]+)\)", readme)
    assert "convergence_vanilla-seed0_vs_vanilla-seed1.png" in links and "iri_examples.png" in links
    for link in links:  # every link resolves, none carries a path separator or colon from a model name
        assert (out / link).is_file() and "/" not in link and ":" not in link, link
    (row,) = rows(out / "pairs.csv")
    assert (row["ref"], row["target"]) == ("vanilla/seed0", "vanilla/seed1")  # labels: readable, unique
    record = json.loads(next((tmp_path / "results/store/direction").glob("*.json")).read_text())["record"]
    assert record["models"]["vanilla/seed0"]["path"] == str((run / "seed0/last.ckpt").resolve())


@pytest.fixture(scope="module")
def factory_weights(tmp_path_factory):
    folder = tmp_path_factory.mktemp("factory")
    for seed, name in ((0, "a"), (1, "b")):
        torch.manual_seed(seed)
        torch.save(source_nets.functional_head().state_dict(), folder / f"{name}.pt")
    zoo = folder / "zoo.yaml"
    zoo.write_text(f"fa: {{source: {FACTORY}, weights: {folder / 'a.pt'}}}\n"
                   f"fb: {{source: {FACTORY}, weights: {folder / 'b.pt'}}}\n")
    return zoo


def common(cifar10_root: Path, tmp_path: Path, zoo: Path) -> list:
    return [f"zoo.file={zoo}", "zoo.allow_code=true", f"out_dir={tmp_path / 'results'}", f"data.root={cifar10_root}",
            "data.download=false", "data.holdout_size=40", *QUICK]  # allow_code: the zoo file's python: entries


def test_invariance_takes_models_of_another_source(cifar10_root, tmp_path, monkeypatch, factory_weights):
    run_entry_point("evaluate", common(cifar10_root, tmp_path, factory_weights) + [
        "experiment=invariance", "experiment.models=[fa,fb]", "experiment.random_init=false",
        "layers.taps=[body.2,body.4,penultimate]", "experiment.transforms=[hflip]", "experiment.noise=[0.0]"],
        monkeypatch)
    table = rows(tmp_path / "results/invariance/geed.csv")
    assert {r["group"] for r in table} == {"fa", "fb"}
    assert {r["tap"] for r in table} == {"body.2", "body.4", "penultimate"}  # module outputs and the NAME:input tap
    assert {r["kind"] for r in table if r["tap"] == "body.2"} == {"invariance", "equivariance"}  # a spatial map


def test_stitching_takes_models_of_another_source(cifar10_root, tmp_path, monkeypatch, factory_weights):
    run_entry_point("evaluate", common(cifar10_root, tmp_path, factory_weights) + [
        "experiment=stitching", "experiment.pairs=[[fa,fb]]", "layers.taps=[body.2,penultimate]",
        "experiment.kinds=[identity,linear]", "experiment.seeds=[0]", "experiment.epochs=1",
        "experiment.train_images=40", "experiment.test_images=20"], monkeypatch)
    table = rows(tmp_path / "results/stitching/stitching.csv")
    assert {(r["front (A)"], r["tap_front"], r["layer"]) for r in table} == {
        (a, tap, kind) for a in ("fa", "fb") for tap in ("body.2", "penultimate") for kind in ("identity", "linear")}
    for r in table:
        assert 0 <= float(r["acc_stitched"]) <= 1 and -1 <= float(r["stir_back_given_front"]) <= 1
    # at "penultimate" (head:input, read and replaced by pre-hooks) the identity stitch of a model into
    # its seed twin is B's head on A's vector: defined, and measured like any other tap
    assert any(r["tap_front"] == "penultimate" and r["layer"] == "identity" for r in table)


def test_a_suite_runs_its_parts_into_one_report(cifar10_root, tmp_path, monkeypatch, factory_weights):
    matching = "{kind: layer_matching, models: [fa, fb], measures: [linear_cka], stir: false, layers: {taps: [body.2, penultimate]}}"
    run_entry_point("evaluate", common(cifar10_root, tmp_path, factory_weights) + [
        "experiment=realnets", "experiment.parts.pairs.pairs=[[fa,fb]]", "experiment.parts.layers.pairs=[[fa,fb]]",
        "experiment.parts.layers.layers.taps=[body.2,penultimate]", "~experiment.parts.layer_matching",
        "~experiment.parts.stitching", f"+experiment.parts.matching={matching}"], monkeypatch)
    out = tmp_path / "results/realnets"
    (pair,) = rows(out / "pairs-pairs.csv")
    assert (pair["ref"], pair["target"], pair["tap_ref"]) == ("fa", "fb", "penultimate")
    assert [r["tap_ref"] for r in rows(out / "layers-pairs.csv")] == ["body.2", "penultimate"]  # the part's own layers
    assert [r["measure"] for r in rows(out / "matching-layer_matching.csv")] == ["linear_cka"]
    record = json.loads((out / "record.json").read_text())
    assert "pairs/stir_m2_given_m1" in record["summary"] and "layers/slope/fa_vs_fb/stir_m2_given_m1" in record["summary"]


def test_context_similarity_takes_a_measure(cifar10_root, tmp_path, factory_weights):
    """``Context.similarity(..., measure=...)`` reads S_r with that measure (stored under it), the
    estimator's ``measure`` otherwise."""
    from stir.experiments.library import open_evaluation

    ctx = open_evaluation(*common(cifar10_root, tmp_path, factory_weights), "ref=fa", "target=fb", "measure=linear_cka")
    a, b = ctx.model("fa"), ctx.model("fb")
    images = ctx.images(a)
    default = ctx.similarity(a, b, images, "penultimate")
    other = ctx.similarity(a, b, images, "penultimate", measure="procrustes_distance")
    assert (default.measure, other.measure) == ("linear_cka", "procrustes_distance")
    assert other.value != default.value
    hits = ctx.store.hits
    assert ctx.similarity(a, b, images, "penultimate", measure="procrustes_distance").value == other.value
    assert ctx.store.hits == hits + 1  # served from the store, keyed by its measure
