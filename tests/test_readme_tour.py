"""The README's tour, run as written (at tiny sizes, on data made here) in a fresh folder, and its
library example: the README cannot drift from the code (issue 22)."""
import csv
import json
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from stir.data import synthetic

README = (REPO / "README.md").read_text()
# Shrinks every recipe to seconds; the same keys for train.py and the zoo recipes evaluate.py finds.
TINY = ["data.download=false", "data.holdout_size=40", "data.batch_size=40", "data.train_size=100", "model.width=4",
        "trainer.max_epochs=1", "attack.steps=2", "eval_attack.steps=2", "trainer.robust_val_every_n_epochs=0",
        "trainer.robust_test_size=10", "trainer.enable_progress_bar=false", "logger.wandb.mode=disabled"]
TINY_EVALUATE = ["n=12", "k=2", "inversion.steps=15", "inversion.record_steps=[5,10]", "difficulty.steps=5",
                 "calibration.permutations=4", "calibration.resamples=50", "logger.wandb.mode=disabled"]


def tour_commands() -> list:
    """The commands of the fenced block after ``<!-- tour -->``, comments stripped."""
    block = README.split("<!-- tour -->", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.strip().splitlines() if line.split("#", 1)[0].strip()]


def library_example() -> str:
    return README.split("## As a library", 1)[1].split("```python", 1)[1].split("```", 1)[0]


def test_the_tour_is_train_two_evaluate_open():
    commands = tour_commands()
    assert [c.split()[:2] for c in commands] == [["python", "train.py"], ["python", "train.py"],
                                                 ["python", "evaluate.py"], ["cat", commands[3].split()[1]]]
    assert all("profile=cpu" in c for c in commands[:3])


@pytest.mark.slow  # ~2-3 min: two trainings and a pair evaluation through the real entry points
def test_the_readme_tour_reaches_a_report_in_a_fresh_folder(tmp_path):
    data_root = tmp_path / "cifar10"
    synthetic.write_cifar10_python(data_root, n_train=160, n_test=40, seed=0)
    work = tmp_path / "fresh"
    work.mkdir()
    tiny = [f"data.root={data_root}", *TINY]
    env = {**{k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}, "PYTHONPATH": str(REPO),
           "OMP_NUM_THREADS": "1"}
    for command in tour_commands():
        words = shlex.split(command)
        if words[0] == "python":
            script = REPO / words[1]
            extra = tiny if words[1] == "train.py" else [
                "zoo.overrides=[" + ",".join(f'"{o}"' for o in tiny) + "]", *TINY_EVALUATE]
            done = subprocess.run([sys.executable, str(script), *words[2:], *extra], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        else:
            done = subprocess.run(command, shell=True, cwd=work, env=env, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, f"{command}: {done.stderr}"
            assert "STIR" in done.stdout and "pairs" in done.stdout  # the report's tables
    report = work / "results/pair_vanilla_vs_vanilla_s1"
    assert (report / "pairs.md").is_file() and (report / "iri_examples.png").is_file()

    # The library example, on the tour's models, with the evaluate command's own overrides and a
    # results folder of its own (no inversion cache shared): the same numbers as the command's report.
    overrides = ["zoo.overrides=[" + ",".join(f'"{o}"' for o in tiny) + "]", *TINY_EVALUATE, "out_dir=library"]
    code = library_example()
    assert 'open_evaluation("profile=cpu")' in code and "print(r)" in code
    code = code.replace('open_evaluation("profile=cpu")', f"open_evaluation('profile=cpu', *{overrides!r})")
    code += ("\nimport json\nfrom stir.experiments.rows import pair_row\n"
             "print('ROW', json.dumps({k: v for k, v in pair_row(r).items() if isinstance(v, float)}))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    printed, row = done.stdout.split("ROW ", 1)
    assert "STIR(vanilla_s1|vanilla) = " in printed and "STIR(vanilla|vanilla_s1) = " in printed  # readable, no repr
    assert "Stat(" not in printed and "linear_cka(vanilla, vanilla_s1) = " in printed
    assert "image-steps of the reference" in done.stderr  # the cost line before the inversions
    library = json.loads(row)
    with open(report / "pairs.csv") as f:
        command = next(csv.DictReader(f))
    numbers = [k for k in library if k.startswith(("stir", "similarity", "agreement", "difficulty"))]
    assert {"stir_m2_given_m1", "stir_m1_given_m2", "similarity", "stir_low_m2_given_m1"} <= set(numbers)
    for key in numbers:
        mine, theirs = library[key], float(command[key]) if command[key] not in ("", "nan") else math.nan
        assert mine == theirs or (math.isnan(mine) and math.isnan(theirs)), (key, mine, theirs)
