"""bench/gpu.sh --smoke runs end to end on a CPU and writes every figure the GPU run reports."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # about 20 s: a tiny STIR pair and a few training steps
def test_gpu_script_smoke_writes_its_figures(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable}  # the interpreter running the tests, not python on PATH
    subprocess.run(["bash", str(REPO / "bench/gpu.sh"), "--smoke", "--out", str(tmp_path)], check=True, cwd=tmp_path,
                   env=env)
    report = json.loads((tmp_path / "bench_gpu.json").read_text())
    pair, train = report["stir_pair"], report["train"]
    assert pair["seconds"] > 0 and pair["peak_memory_mib"] > 0 and pair["inversions"] == 2
    assert 0 <= pair["stir_m2_given_m1"] <= 1 and 0 <= pair["stir_m1_given_m2"] <= 1
    assert pair["calibration"].startswith("off")  # the published STIR alone is timed
    # figures only, no timing claims (the cores may be shared): positive and finite
    assert all(math.isfinite(v) and v > 0 for v in train.values()) and set(train) == {
        "vanilla_images_per_s", "at_images_per_s", "at_over_vanilla", "vanilla_100_epochs_hours"}
    device = json.loads((tmp_path / "bench_train_device.json").read_text())  # bench_train.py device: train.py's steps
    assert {"paper vanilla", "fast vanilla, device-resident data", "paper AT (PGD-10)"} <= set(device["runs"])
    assert all(r["images_per_s"] > 0 for r in device["runs"].values()) and device["paper_100_epochs_hours"]["at"] > 0
