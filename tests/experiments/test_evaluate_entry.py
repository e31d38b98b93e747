"""evaluate.py end to end on tiny models and data, through the real Hydra entry point."""
import csv
import json
import re
from pathlib import Path

import pytest

from conftest import refused, run_entry_point

# Every zoo recipe shrunk to seconds (width 4, one epoch, 2-step attacks); W&B off for training.
ZOO_OVERRIDES = [
    "data.download=false", "data.holdout_size=40", "data.batch_size=40", "model.width=4", "trainer.max_epochs=1",
    "attack.steps=2", "eval_attack.steps=2", "trainer.robust_test_size=10", "trainer.robust_val_every_n_epochs=0",
    "trainer.enable_progress_bar=false", "logger.wandb.mode=disabled",
]


def eval_args(root: Path, data_root: Path, *extra: str) -> list:
    overrides = ",".join(f'"{o}"' for o in [f"data.root={data_root}", *ZOO_OVERRIDES])
    return [
        f"zoo.overrides=[{overrides}]", f"zoo.runs_dir={root / 'runs'}", f"out_dir={root / 'results'}",
        "n=12", "k=2", "inversion.steps=15", "inversion.tolerance=0.05", "min_fraction_iri=0", "iri_grid_images=4",
        "calibration.permutations=4", "calibration.resamples=50", "logger.wandb.mode=disabled",
        "difficulty.steps=200",  # a walk of its own: 15 steps (the inversion's budget) would censor every image, 50 most
        *extra,
    ]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, cifar10_root):
    """Trains the zoo models the tests compare, through evaluate.py's train_missing=true."""
    root = tmp_path_factory.mktemp("evaluate")
    mp = pytest.MonkeyPatch()
    try:
        run_entry_point("evaluate", eval_args(root, cifar10_root, "ref=at", "target=vanilla", "train_missing=true",
                                              "logger.wandb.mode=offline"), mp)
    finally:
        mp.undo()
    return root


def store_files(root: Path) -> dict:
    return {p: p.stat().st_mtime_ns for p in (root / "results/store").rglob("*.json")}


def test_pair_writes_tables_plots_record_and_wandb(workspace):
    out = workspace / "results/pair_at_vs_vanilla"
    for name in ("pairs.csv", "pairs.md", "iri_examples.png", "record.json", "README.md", "convergence.csv",
                 "convergence_at_vs_vanilla.png"):
        assert (out / name).is_file(), name
    table = (out / "pairs.md").read_text()
    assert "STIR(m2|m1)" in table.replace("\\|", "|") and "at" in table and "vanilla" in table
    readme = (out / "README.md").read_text()  # issue 34: the headline first, every column a link away
    header = next(line for line in readme.splitlines() if line.startswith("|"))
    from stir.experiments import pair_reading

    assert [c.strip() for c in header.strip("|").split("|")] == [  # issue 69: worded columns
        pair_reading.DIRECTION, pair_reading.PUBLISHED, pair_reading.NORMALISED, pair_reading.FLOOR_CEILING,
        pair_reading.INVERTED, pair_reading.AT_IRIS, "linear CKA (no direction)", "notes"]
    assert "floor(m2" not in readme and "[`pairs.md`](pairs.md)" in readme
    (wandb_file,) = out.glob("wandb/offline-run-*/run-*.wandb")
    assert b"pairs" in wandb_file.read_bytes()
    from stir.reporting.wandb_read import read_run

    wb = read_run(wandb_file, wait_s=30.0)
    assert wb.job_type == "evaluate" and wb.name == "evaluate/pair_at_vs_vanilla"
    assert (wb.config["ref"], wb.config["target"]) == ("at", "vanilla")
    assert "loss=at" in wb.config["models"]["at"]["command"]
    assert wb.config["models"]["at"]["artifact"].startswith("model-") and wb.config["models"]["at"]["sha256"]
    for key in ("stir_m2_given_m1", "stir_m1_given_m2", "stir_adv_m2_given_m1", "stir_adv_m1_given_m2",
                "linear_cka", "agreement_on_m1_iris", "difficulty_m2_given_m1",
                "fraction_iri_arbitrary_m2_given_m1"):
        assert isinstance(wb.summary[key], float), key
    assert not [k for k in wb.summary
                if "/" in k and k.split("/")[0] not in ("pairs", "convergence", "at_iris", "models", "figures", "_wandb")]
    assert wb.summary["pairs/_type"] == "table-file" and wb.summary["figures/iri_examples/_type"] == "image-file"
    assert wb.summary["convergence/_type"] == "table-file"  # STIR along the budget, in W&B too
    assert wb.summary["figures/convergence_at_vs_vanilla/_type"] == "image-file"
    from stir.reporting.dashboard import missing_keys

    assert missing_keys(wb) == []  # the dashboard's STIR-vs-CKA panel finds its keys
    record = json.loads((out / "record.json").read_text())
    assert record["config"]["ref"] == "at" and "torch" in record["versions"]
    # issue 55: the report names its models (source, recipe, accuracy, dtype) and flags barely trained ones
    models = {m["model"]: m for m in record["models"]}
    assert set(models) == {"at", "vanilla"} and models["at"]["loss"] == "at" and models["vanilla"]["epochs"] == 1
    assert models["at"]["width"] == 4 and models["at"]["source"].startswith("trained here (")
    assert 0 <= models["at"]["clean_accuracy"] < 0.6 and models["at"]["dtype"] == "float32"
    assert all(m["flag"] == "barely trained: read with care" for m in models.values())
    assert "## models" in readme and readme.count("barely trained: read with care") >= 4  # table rows and notes
    assert readme.index("## STIR both ways") < readme.index("## models") < readme.index("(convergence)")
    entry = json.loads(next((workspace / "results/store/direction").glob("*.json")).read_text())
    assert entry["record"]["models"]["at"]["sha256"] and entry["record"]["config"]["k"] == 2
    assert entry["result"]["stir"]["values"] and len(entry["result"]["stir"]["values"]) == 2
    # issue 9: the published procedure by default, its convergence in every stored STIR, the budget said
    assert entry["result"]["settings"]["inversion"]["mode"] == "faithful"
    assert entry["result"]["convergence"]["arbitrary"]["steps"][-1] == 15
    assert any("15 faithful steps, not the original code's default 1000" in n for n in record["notes"])
    assert "15 faithful steps" in (out / "README.md").read_text()
    # issue 53: the calibrated interval reading by default, and no note about the shipped results' one
    assert entry["result"]["calibration"]["stir"]["interval_reading"] == "jackknife_corrected"
    assert not any(n.startswith("intervals:") for n in record["notes"])


def test_rerun_reuses_every_stored_result(workspace, cifar10_root, monkeypatch):
    before = store_files(workspace)
    runs = set((workspace / "results/pair_at_vs_vanilla").glob("wandb/offline-run-*"))
    run_entry_point("evaluate", eval_args(workspace, cifar10_root, "ref=at", "target=vanilla",
                                          "logger.wandb.mode=offline"), monkeypatch)
    assert store_files(workspace) == before  # nothing recomputed, nothing rewritten
    # Served entirely from the store: no second W&B run of the same numbers unless asked.
    assert set((workspace / "results/pair_at_vs_vanilla").glob("wandb/offline-run-*")) == runs


def test_swapping_ref_and_target_swaps_the_directions(workspace, cifar10_root, monkeypatch):
    run_entry_point("evaluate", eval_args(workspace, cifar10_root, "ref=vanilla", "target=at"), monkeypatch)
    import csv

    (a,) = csv.DictReader(open(workspace / "results/pair_at_vs_vanilla/pairs.csv"))
    (b,) = csv.DictReader(open(workspace / "results/pair_vanilla_vs_at/pairs.csv"))
    assert a["stir_m2_given_m1"] == b["stir_m1_given_m2"] and a["stir_m1_given_m2"] == b["stir_m2_given_m1"]


def test_layerwise_pair_has_a_row_per_tap_pair_and_a_slope_plot(workspace, cifar10_root, monkeypatch):
    run_entry_point("evaluate", eval_args(workspace, cifar10_root, "ref=at", "target=vanilla", "layers.taps=[stem,layer2.0,penultimate]",
                                          "iri=arbitrary", "out_dir=" + str(workspace / "results_layers")), monkeypatch)
    out = workspace / "results_layers/pair_at_vs_vanilla"
    import csv

    rows = list(csv.DictReader(open(out / "pairs.csv")))
    assert [r["tap_ref"] for r in rows] == ["stem", "layer2.0", "penultimate"]
    assert (out / "layers_at_vs_vanilla.png").is_file()
    header = next(line for line in (out / "README.md").read_text().splitlines() if line.startswith("|"))
    assert header.split("|")[1].strip() == "depth" and "STIR_adv" in header  # the headline: a row per tap and direction


def test_matrix_preset_writes_its_table_and_heatmap(workspace, cifar10_root, monkeypatch):
    run_entry_point("evaluate", eval_args(workspace, cifar10_root, "experiment=relative_robustness", "train_missing=true",
                                          "iri=arbitrary", "logger.wandb.mode=offline"), monkeypatch)
    out = workspace / "results/relative_robustness"
    import csv

    matrix = list(csv.DictReader(open(out / "matrix_stir.csv")))
    assert [r["m1 (ref) \\ m2 (target)"] for r in matrix] == ["at", "at_it1", "vanilla"]
    assert all(0 <= float(r["at"]) <= 1 for r in matrix)
    assert (out / "matrix_stir.png").is_file() and (out / "accuracy.csv").is_file()
    # the same cells against their own floor and ceiling (issue 29), equal to the directions' calibration
    normalised = {r["m1 (ref) \\ m2 (target)"]: r for r in csv.DictReader(open(out / "matrix_stir_normalised.csv"))}
    directions = {(r["ref"], r["target"]): r for r in csv.DictReader(open(out / "directions.csv"))}
    for (ref, target), r in directions.items():
        cell = float(normalised[ref][target])
        assert cell == pytest.approx(float(r["stir_normalised"]), nan_ok=True), (ref, target)
    readme = (out / "README.md").read_text()
    assert readme.index("## directions") < readme.index("## matrix_stir")  # the headline of the directions first
    # STIR at IRIs beside each off-diagonal direction (issue 53): not in this store, so "not measured" and how
    at_iris = list(csv.DictReader(open(out / "at_iris.csv")))
    assert len(at_iris) == 6 and {r["direction"] for r in at_iris} >= {"STIR(vanilla|at)", "STIR(at|vanilla)"}
    assert all(r["at_iris"] == "nan" for r in at_iris)
    assert "at_iris: 0 of 6 directions read at IRIs" in readme and "experiment.at_iris=measure measures them" in readme
    # the headline carries each value's floor and ceiling (issue 55); every other column a link away
    assert "[`directions.md`](directions.md)" in readme and "| floor | ceiling |" in readme.split("## matrix_stir")[0]
    from stir.reporting.dashboard import draw_local, missing_keys
    from stir.reporting.wandb_read import read_run

    (wandb_file,) = out.glob("wandb/offline-run-*/run-*.wandb")
    wb = read_run(wandb_file, wait_s=30.0)
    assert missing_keys(wb) == [] and wb.summary["matrix/at/at_it1/stir"] == pytest.approx(float(matrix[0]["at_it1"]))
    png = draw_local(workspace / "runs", workspace / "results", workspace / "dashboard.png")
    assert png.stat().st_size > 20_000  # the local panels: curves, matrix, scatter drawn from these files


@pytest.mark.parametrize(
    "extra, error, message",
    [
        (["ref=nosuchmodel"], ValueError, r"unknown model 'nosuchmodel': not a zoo name of .*zoo.yaml \(\d+ names in the zoo "
                                          r"file\) \(nor a run folder or checkpoint here"),
        (["ref=vanila"], ValueError, r"unknown model 'vanila': .*did you mean 'vanilla'"),
        (["layers.taps=[nosuchtap]"], ValueError, r"unknown tap 'nosuchtap'.*valid taps"),
        (["layers.reduce=max"], ValueError, r"layers.reduce='max' is not a valid choice.*spatial_mean"),
        (["n=100000"], ValueError, r"cannot sample n=100000 images"),
        (["measure=nosuchmeasure"], ValueError, r"measure='nosuchmeasure': unknown similarity measure"),
        (["measure=linear_ckaa"], ValueError, r"did you mean 'linear_cka'"),
    ],
)
def test_bad_input_gets_a_clear_error(workspace, cifar10_root, monkeypatch, extra, error, message):
    with pytest.raises(error, match=message):
        run_entry_point("evaluate", eval_args(workspace, cifar10_root, "ref=at", "target=vanilla", *extra), monkeypatch)


def test_missing_model_error_prints_the_train_command(workspace, cifar10_root, monkeypatch):
    with pytest.raises(FileNotFoundError, match=r"(?s)not trained.*python train.py profile=full .*loss=at seed=1"):
        run_entry_point("evaluate", eval_args(workspace, cifar10_root, "ref=at_s1", "target=vanilla"), monkeypatch)


def test_a_served_only_reading_is_one_line_and_exit_2_and_no_direction_is_measured(workspace, cifar10_root, monkeypatch,
                                                                                     capsys):
    """profile=laptop's half_sampling serves the shipped results only (issue 53): a direction not stored under it
    is refused in one line naming the calibrated reading, before its inversion; no direction is written."""
    directions = lambda: {p: t for p, t in store_files(workspace).items() if p.parent.name == "direction"}  # noqa: E731
    before = directions()
    message = refused("evaluate", eval_args(workspace, cifar10_root, "ref=at", "target=vanilla",
                                            "calibration.interval=half_sampling"), monkeypatch, capsys)
    assert message.startswith("calibration.interval=half_sampling serves the shipped results only: it covers 94-100%")
    assert "STIR(vanilla|at) at (penultimate, penultimate) is not stored under it" in message
    assert message.endswith("(profile=laptop names half_sampling to serve the shipped zoo)")
    assert directions() == before


def test_shards_split_a_matrix_by_rows_and_the_assembling_run_recomputes_nothing(workspace, cifar10_root, monkeypatch):
    out = workspace / "results_shards"

    def evaluate(*extra):
        run_entry_point("evaluate", eval_args(workspace, cifar10_root, "experiment=relative_robustness",
                                              "experiment.models=[at,vanilla]", f"out_dir={out}", *extra), monkeypatch)

    def stored(kind):
        return {p: p.stat().st_mtime_ns for p in (out / "store" / kind).glob("*.json")}

    evaluate("shard=1", "shards=2")  # row 1 (reference vanilla): 2 directions, S(vanilla, vanilla)
    assert (len(stored("direction")), len(stored("similarity"))) == (2, 1)
    assert sorted(json.loads(p.read_text())["result"]["ref"] for p in stored("direction")) == ["vanilla", "vanilla"]
    evaluate("shard=0", "shards=2")  # row 0 (reference at): 2 directions, S(at, at) and S(at, vanilla)
    assert (len(stored("direction")), len(stored("similarity"))) == (4, 3)
    assert not (out / "relative_robustness/matrix_stir.csv").exists()  # shards write no report
    before = {**stored("direction"), **stored("similarity")}
    evaluate()
    assert {**stored("direction"), **stored("similarity")} == before  # assembled from the store alone
    assert (out / "relative_robustness/matrix_stir.csv").is_file()


@pytest.mark.parametrize(
    "extra, message",
    [(["shard=2", "shards=2"], r"shard must be one of 0\.\.1"),
     (["shards=2", "train_missing=true"], r"train the zoo models first")],
)
def test_bad_shard_settings_fail_before_any_work(workspace, cifar10_root, monkeypatch, extra, message):
    with pytest.raises(ValueError, match=message):
        run_entry_point("evaluate", eval_args(workspace, cifar10_root, "ref=at", "target=vanilla", *extra), monkeypatch)


def test_reports_with_other_settings_get_their_own_folder_and_an_index(workspace, cifar10_root, monkeypatch):
    """The same pair with another n / iri writes a second report beside the first, never over it."""
    out = workspace / "results_settings"

    def evaluate(*extra):
        run_entry_point("evaluate", eval_args(workspace, cifar10_root, "ref=at", "target=vanilla", "iri=arbitrary",
                                              f"out_dir={out}", *extra), monkeypatch)

    evaluate()
    (first,) = out.glob("pair_at_vs_vanilla-*/pairs.csv")
    before = first.read_bytes()
    evaluate("n=10")
    evaluate("n=10", "iri=adversarial")
    tables = sorted(out.glob("pair_at_vs_vanilla-*/pairs.csv"))
    assert len(tables) == 3 and first.read_bytes() == before  # the first report is intact
    import csv

    assert sorted(next(csv.DictReader(open(t)))["n"] for t in tables) == ["10", "10", "12"]
    index = json.loads((out / "index.json").read_text())
    assert sorted(index) == sorted(t.parent.name for t in tables)
    assert {e["settings"]["n"] for e in index.values()} == {10, 12}
    listing = (out / "index.md").read_text()
    assert "| folder | updated | iri | n |" in listing  # the settings in which the reports differ, only those
    found = re.findall(r"\]\(([^)]+)\)", listing)  # issue 34: every folder a link to its README.md, relative
    assert {f"{t.parent.name}/README.md" for t in tables} <= set(found) and "pair_at_vs_vanilla/README.md" in found
    assert all((out / f).is_file() for f in found)
    latest = next(csv.DictReader(open(out / "pair_at_vs_vanilla" / "pairs.csv")))  # the link: the latest report
    assert (latest["n"], latest["iri"]) == ("10", "adversarial")


def test_a_bare_weights_file_takes_its_images_from_zoo_data_source(tmp_path):
    """A weights.pt without its run folder: X comes from zoo.data_source, not from CIFAR downloads."""
    import torch

    from conftest import REPO
    from stir.config.schema import ModelConfig
    from stir.data import synthetic
    from stir.experiments.config import compose_evaluate
    from stir.experiments.context import open_context
    from stir.models import build, channel_stats

    net = build(ModelConfig(width=4), 10, *channel_stats("cifar10"))
    torch.save({"state_dict": net.state_dict(), "model": {"arch": "resnet18", "width": 4}, "data": "cifar10",
                "num_classes": 10}, tmp_path / "weights.pt")
    synthetic.write_image_folder(tmp_path / "images", n_train=30, n_test=10, seed=0)
    cfg, experiment = compose_evaluate(REPO / "configs/evaluate", [
        f"ref={tmp_path / 'weights.pt'}", f"target={tmp_path / 'weights.pt'}", f"zoo.data_source={tmp_path / 'images'}",
        "n=8", 'zoo.overrides=["data.holdout_size=10"]', f"out_dir={tmp_path / 'results'}"])
    ctx = open_context(cfg, experiment, repo=REPO)
    model = ctx.role("ref")
    assert model.data.source == str(tmp_path / "images") and model.data.num_classes == 10 and model.data.holdout_size == 10
    assert ctx.images(model).shape == (8, 3, 32, 32)
    assert model.label == f"{tmp_path.parent.name}/{tmp_path.name}"  # the recipe part of its path (weights.pt: no stem)


def test_the_iri_shortfall_names_the_kind_and_the_same_fix_as_the_log(workspace):
    """Issue 22, error 9: the note says which IRI kind and the fix the engine's warning gives."""
    from stir.inversion.config import InversionConfig, iri_shortfall

    table = (workspace / "results/pair_at_vs_vanilla/pairs.md").read_text().splitlines()
    notes = [n.strip() for n in table if "IRIs: only" in n]
    assert notes and all(n.split(": ", 1)[1].startswith(("arbitrary IRIs: only", "adversarial IRIs: only")) for n in notes)
    fix = iri_shortfall("arbitrary", 0.0, 1, 0.1, InversionConfig(steps=15)).split("; ", 1)[1]
    assert all(n.endswith(fix) for n in notes) and "inversion.continue_steps=1000" in fix


def test_wandb_read_prints_what_a_run_holds_and_its_tables(workspace, capsys):
    """Issue 22, error 7: python -m stir.reporting.wandb_read printed nothing; OfflineRun had no tables."""
    from stir.reporting import wandb_read

    (run_file,) = (workspace / "results/pair_at_vs_vanilla").glob("wandb/offline-run-*/run-*.wandb")
    run = wandb_read.read_run(run_file, wait_s=30.0)
    assert {"pairs", "convergence"} <= set(run.tables)
    table = run.table("pairs")
    assert table["columns"][:2] == ["ref", "target"] and len(table["data"]) == 1
    assert wandb_read.main([str(run_file.parent)]) == 0
    out = capsys.readouterr().out
    assert "job_type evaluate" in out and "tables: " in out and "pairs (1 rows)" in out and "stir_m2_given_m1 = " in out
    assert wandb_read.main([str(run_file), "--table", "pairs"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("ref\ttarget\t")


def test_a_pair_shows_stir_at_iris_beside_the_published_value_stored_or_measured(workspace, cifar10_root, monkeypatch):
    """Issue 53: every pair report has, per direction, STIR at IRIs (its level, the fraction of X' that
    reached it) beside the published STIR. By default (at_iris=stored) only what the store holds, the
    rest "not measured" with the override that measures it; at_iris=measure measures and stores it under
    its own kind, and a default run then serves it; the published results are not touched."""
    args = ("ref=at", "target=vanilla", "experiment.at_iris_steps=60", "experiment.at_iris_level=0.05")
    run_entry_point("evaluate", eval_args(workspace, cifar10_root, *args), monkeypatch)
    report = workspace / "results/pair_at_vs_vanilla"
    rows = list(csv.DictReader((report / "at_iris.csv").open()))
    assert [r["direction"] for r in rows] == ["STIR(vanilla|at)", "STIR(at|vanilla)"]
    assert all(r["at_iris"] == "nan" and float(r["published"]) > 0 for r in rows)
    assert ("at_iris: 0 of 2 directions read at IRIs (r1 <= 0.05); the rest are not in the results store: "
            "experiment.at_iris=measure") in (report / "README.md").read_text()

    before = store_files(workspace)
    run_entry_point("evaluate", eval_args(workspace, cifar10_root, *args, "experiment.at_iris=measure"), monkeypatch)
    after = store_files(workspace)
    assert {p: t for p, t in after.items() if p in before} == before  # every published entry as it was
    new = [p for p in after if p not in before]
    assert len(new) == 2 and all(p.parent.name == "direction_at_iris" for p in new)
    measured = list(csv.DictReader((report / "at_iris.csv").open()))
    for column in ("published", "published_median_residual", "at_iris", "at_iris_low", "level", "fraction_reached",
                   "at_iris_median_residual", "evaluations_per_image"):
        assert column in measured[0], column
    assert all(float(r["level"]) == 0.05 and 0 <= float(r["fraction_reached"]) <= 1 for r in measured)
    assert "at_iris: 2 of 2 directions read at IRIs (r1 <= 0.05)" in (report / "README.md").read_text()

    run_entry_point("evaluate", eval_args(workspace, cifar10_root, *args), monkeypatch)  # stored: served now
    assert store_files(workspace) == after
    served = list(csv.DictReader((report / "at_iris.csv").open()))
    assert [r["at_iris"] for r in served] == [r["at_iris"] for r in measured]


def test_an_unknown_at_iris_choice_is_one_line_with_the_choices(workspace, cifar10_root, monkeypatch, capsys):
    line = refused("evaluate", eval_args(workspace, cifar10_root, "ref=at", "target=vanilla", "experiment.at_iris=true"),
                   monkeypatch, capsys)
    assert "experiment.at_iris='True'" in line and "choose one of ['stored', 'measure', 'off']" in line


def test_an_incremental_report_shows_each_links_directions_at_iris(workspace, cifar10_root, monkeypatch):
    """Issue 53: the incremental kind has the at_iris table too, one row per direction of each link, with its
    chain and training-set size; measured here (at_iris=measure), served by the next run."""
    args = ("experiment=incremental", "experiment.chains={vanilla:[vanilla,at]}", "~experiment.chains.AT",
            "experiment.at_iris=measure", "experiment.at_iris_steps=40", "experiment.at_iris_level=0.05")
    run_entry_point("evaluate", eval_args(workspace, cifar10_root, *args), monkeypatch)
    out = workspace / "results/incremental"
    rows = list(csv.DictReader((out / "at_iris.csv").open()))
    assert [(r["chain"], r["direction"]) for r in rows] == [("vanilla", "STIR(at|vanilla)"), ("vanilla", "STIR(vanilla|at)")]
    assert all(0 <= float(r["fraction_reached"]) <= 1 and float(r["level"]) == 0.05 for r in rows)
    assert "at_iris: " in (out / "README.md").read_text()
