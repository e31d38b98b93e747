#!/usr/bin/env bash
# docs/dashboard.png (docs/evaluation.md, "Dashboard") from local data only (no network, no W&B): a synthetic CIFAR-10 in the
# official layout, tiny zoo models (width 4, a few epochs), a pair, a matrix and an incremental chain,
# then `python -m stir.reporting.dashboard png`. About 40 minutes on 2 busy CPU cores.
#   bash bench/dashboard_demo.sh /tmp/stir-demo docs/dashboard.png
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO=${1:-/tmp/stir-demo}
OUT=${2:-docs/dashboard.png}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
python -c "from stir.data import synthetic; synthetic.write_cifar10_python('$DEMO/data', n_train=1200, n_test=100, seed=0)"
TRAIN=(data.root=$DEMO/data data.download=false data.holdout_size=100 data.batch_size=50 model.width=4
       trainer.max_epochs=4 attack.steps=2 eval_attack.steps=2 trainer.robust_val_size=50
       trainer.robust_test_size=50 trainer.robust_val_every_n_epochs=1 trainer.enable_progress_bar=false
       logger.wandb.mode=disabled)
python train.py -m loss=vanilla,at seed=0,1 "${TRAIN[@]}" runs_dir=$DEMO/runs
ZOO=$(printf '"%s",' "${TRAIN[@]}"); ZOO="zoo.overrides=[${ZOO%,}]"
EVAL=("$ZOO" zoo.runs_dir=$DEMO/runs out_dir=$DEMO/results n=40 k=2 inversion.steps=40 logger.wandb.mode=disabled)
python evaluate.py ref=at target=vanilla "${EVAL[@]}"
EVAL+=(iri=arbitrary)  # the rest: STIR only (adversarial IRIs double the inversions)
python evaluate.py ref=at target=at_s1 "${EVAL[@]}"
python evaluate.py ref=vanilla target=vanilla_s1 "${EVAL[@]}"
python evaluate.py experiment=relative_robustness 'experiment.models=[at,at_s1,vanilla,vanilla_s1]' "${EVAL[@]}"
python evaluate.py experiment=incremental 'experiment.chains={vanilla:[vanilla_n500,vanilla_n1000],AT:[at_n500,at_n1000]}' \
    train_missing=true "${EVAL[@]}"
python -m stir.reporting.dashboard png --runs $DEMO/runs --results $DEMO/results --out "$OUT"
