"""python evaluate.py ref=NAME target=NAME [key=value ...] | experiment=NAME [profile=cpu]

Directional STIR, STIR_adv, plain similarity, prediction agreement and controversial-stimulus
difficulty between zoo models (configs/zoo.yaml) or checkpoints; see README.md.
"""
import logging
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from stir.config.evaluate_store import evaluate_config, register_evaluate_configs
from stir.evaluation.experiments import run
from stir.evaluation.publish import publish
from stir.evaluation.session import Session

REPO = Path(__file__).resolve().parent
log = logging.getLogger("evaluate")
register_evaluate_configs()


@hydra.main(config_path=str(REPO / "configs" / "evaluate"), config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    config = evaluate_config(cfg)  # typed and validated before any work
    session = Session.open(config, repo=REPO)
    report = run(session)
    publish(report, session.out, config.logger, OmegaConf.to_container(cfg, resolve=True), run_name=f"evaluate/{config.experiment.name}")
    log.info("results in %s", session.out)


if __name__ == "__main__":
    main()
