"""The golden set: every experiment kind of evaluate.py on tiny trained models, and the values it stores.

``run_all(root, data_root)`` trains a small zoo (its own zoo file, width 4, one epoch on the tiny
synthetic CIFAR-10 of ``tests/conftest.py``) and runs, through the real entry point, one small
deterministic evaluation of each kind: a pair (STIR, STIR_adv, difficulty, similarity), a layer-wise
pair, a matrix, an incremental chain, layer matching, grounding, G-EED and stitching.
``golden_view(store)`` reads every stored result back as {stable name: number}: the numbers an
evaluation reports, named by what they are (kind, models by zoo name, taps, field path), never by
store key or content hash, so that a rewrite of the evaluation layer that changes keys, identities
or the shape of a result can still be held to the same values.

``python tests/golden/golden.py --write`` (from the repository root) rewrites the fixture; do that
only when a value is meant to change, and say why in the commit.
"""
from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

REPO = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).with_name("fixture.json")

# The zoo of the golden set: vanilla seeds 0-2, AT, and a growing-data chain.
ZOO = """\
a: [loss=vanilla]
b: [loss=vanilla, seed=1]
c: [loss=vanilla, seed=2]
r: [loss=at]
n40: [loss=vanilla, data.train_size=40]
n80: [loss=vanilla, data.train_size=80]
"""

TRAIN = [  # every recipe shrunk to seconds
    "data.download=false", "data.holdout_size=40", "data.batch_size=40", "model.width=4", "trainer.max_epochs=1",
    "attack.steps=2", "eval_attack.steps=2", "trainer.robust_test_size=10", "trainer.robust_val_every_n_epochs=0",
    "trainer.enable_progress_bar=false", "logger.wandb.mode=disabled",
]

COMMON = ["n=12", "k=2", "inversion.steps=12", "inversion.tolerance=0.05", "inversion.record_steps=[4,8]",
          "difficulty.steps=8", "iri_grid_images=2", "logger.wandb.mode=disabled", "train_missing=true"]

MEASURES = "[linear_cka,procrustes_distance,cca]"  # fixed lists: a new registered measure must not change the set
TAPS = "layers.taps=[stem,layer2.1,penultimate]"

# (name, overrides) of each evaluation, in the order they run (the first trains the zoo).
RUNS: List[Tuple[str, List[str]]] = [
    ("pair", ["ref=r", "target=a", "iri=both"]),
    ("layers", ["ref=a", "target=b", "iri=arbitrary", "layers.taps=original", "layers.count=3"]),
    ("matrix", ["experiment=relative_robustness", "experiment.models=[r,a,b]", "iri=both"]),
    ("incremental", ["experiment=incremental", "experiment.chains.vanilla=[n40,n80]", "~experiment.chains.AT"]),
    ("layer_matching", ["experiment=layer_matching", "experiment.models=[a,b]", TAPS, "k=1",
                        f"experiment.measures={MEASURES}"]),
    ("grounding", ["experiment=grounding", "experiment.models=[a,b]", TAPS, "k=1", "experiment.n_probe=40",
                   "experiment.pc_ks=[1,2]", "experiment.n_boot=20", f"experiment.measures={MEASURES}",
                   "experiment.robustness_models=[a,b,r]"]),
    ("invariance", ["experiment=invariance", "experiment.models=[a,b,r]", "layers.taps=[stem,penultimate]",
                    "experiment.transforms=[hflip,shift1,rot90]", "experiment.noise=[0.0,0.1]"]),
    ("stitching", ["experiment=stitching", "experiment.pairs=[[a,r]]", "layers.taps=[layer1.1,penultimate]",
                   "experiment.train_images=40", "experiment.test_images=20", "experiment.epochs=1",
                   "experiment.seeds=[0,1]", "iri=arbitrary"]),
]

# Result fields that say how long something took: not values of the measurement.
VOLATILE = {"seconds", "elapsed", "timestamp"}


def arguments(root: Path, data_root: Path, overrides: List[str]) -> List[str]:
    zoo = ",".join(f'"{o}"' for o in [f"data.root={data_root}", *TRAIN])
    return [f"zoo.file={root / 'zoo.yaml'}", f"zoo.overrides=[{zoo}]", f"zoo.runs_dir={root / 'runs'}",
            f"out_dir={root / 'results'}", *COMMON, *overrides]


def run_all(root: Path, data_root: Path, run) -> Path:
    """Every evaluation of ``RUNS`` with ``run(args)`` (the entry point); the results store's folder."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "zoo.yaml").write_text(ZOO)
    for _, overrides in RUNS:
        run(arguments(root, data_root, overrides))
    return root / "results" / "store"


def _leaves(value: Any, path: str) -> Iterator[Tuple[str, float]]:
    if isinstance(value, bool):
        yield path, float(value)
    elif isinstance(value, (int, float)):
        yield path, float(value)
    elif isinstance(value, dict):
        for k in sorted(value):
            if k not in VOLATILE:
                yield from _leaves(value[k], f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")


def _names(entry: Dict[str, Any]) -> Dict[str, str]:
    """Content identity -> zoo name, from the entry's provenance record."""
    models = entry.get("record", {}).get("models", {})
    return {m.get("sha256"): name for name, m in models.items() if isinstance(m, dict)}


def _label(kind: str, result: Dict[str, Any], names: Dict[str, str]) -> str:
    """What one stored result is about, in words that survive a change of keys and identities."""
    def name(identity: str) -> str:
        return names.get(identity, identity)

    if kind in ("direction", "similarity"):
        return (f"{kind}:{result['measure']}:{name(result['ref_id'])}@{result['tap_ref']}->"
                f"{name(result['target_id'])}@{result['tap_target']}:n{result['n']}"
                + (f":k{result['k']}:{result['iri']}" if kind == "direction" else ""))
    if kind == "stitching":
        return f"stitching:{result['a']}@{result['tap_a']}->{result['b']}@{result['tap_b']}:{result['kind']}:seed{result['seed']}"
    if kind == "geed":
        return f"geed:{result['model']}"
    if kind == "layer_matching":
        return f"layer_matching:{result['measure']}"
    if kind == "grounding":
        return f"grounding:{result['test']}:{','.join(sorted(p for pt in result['points'] for p in pt['dissimilarity']))}"
    raise ValueError(f"golden set: unknown store kind {kind!r}")


# Fields of a result that name things, hold identities or echo the settings: compared through the label
# (or not at all: settings are inputs, not measured values), not as numbers.
IDENTIFYING = {"ref_id", "target_id", "n", "k", "settings"}


def golden_view(store: Path) -> Dict[str, float]:
    """{"<label>.<field path>": value} for every number of every stored result under ``store``."""
    view: Dict[str, float] = {}
    for path in sorted(store.glob("*/*.json")):
        entry = json.loads(path.read_text())
        kind, result = entry["kind"], entry["result"]
        label = _label(kind, result, _names(entry))
        for field, value in _leaves({k: v for k, v in result.items() if k not in IDENTIFYING}, label):
            if field in view and not _same(view[field], value):
                raise ValueError(f"golden set: two stored results give {field} = {view[field]!r} and {value!r}")
            view[field] = value
    return view


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def machine() -> Dict[str, str]:
    """What decides whether float results can be bit-identical (tests/conftest.py ``host``)."""
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import host

    return host()


def write_fixture(view: Dict[str, float]) -> None:
    """The values of this host; the record of deliberate changes (``changes``) is kept."""
    changes = json.loads(FIXTURE.read_text()).get("changes", []) if FIXTURE.exists() else []
    FIXTURE.write_text(json.dumps({"machine": machine(), "values": {k: repr(v) for k, v in sorted(view.items())},
                                   "changes": changes}, indent=1) + "\n")


def read_fixture() -> Tuple[Dict[str, str], Dict[str, float]]:
    data = json.loads(FIXTURE.read_text())
    return data["machine"], {k: float(v) for k, v in data["values"].items()}


def _main() -> None:  # python tests/golden/golden.py --write [ROOT] [ROOT]
    import tempfile

    import torch

    sys.path.insert(0, str(REPO / "tests"))
    from conftest import load_entry_point  # noqa: E402
    from stir.data import synthetic

    if "--write" not in sys.argv:
        raise SystemExit("usage: python tests/golden/golden.py --write")
    torch.set_num_threads(1)  # as the tests run (tests/conftest.py)
    given = [a for a in sys.argv[1:] if a != "--write"]  # a folder to keep the workspace in (reruns reuse it)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(given[0]) if given else Path(tmp)
        data = root / "cifar10"
        if not data.is_dir():
            synthetic.write_cifar10_python(data, n_train=160, n_test=40, seed=0)  # tests/conftest.py's cifar10_root
        module = load_entry_point("evaluate")

        def run(args):
            sys.argv = ["evaluate.py", *args]
            module.main()

        import os

        os.environ["HYDRA_FULL_ERROR"] = "1"
        write_fixture(golden_view(run_all(root / "golden", data, run)))
    logging.getLogger(__name__).warning("wrote %s", FIXTURE)


if __name__ == "__main__":
    _main()
