"""python evaluate.py ref=NAME target=NAME [key=value ...] | experiment=NAME [profile=cpu]

Directional STIR, STIR_adv, plain similarity, prediction agreement and controversial-stimulus
difficulty between zoo models (configs/zoo.yaml) or checkpoints; see README.md.
"""
import dataclasses
import logging
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from stir.cli import one_line_errors
from stir.config import ConfigError
from stir.config.evaluate_store import evaluate_config, register_evaluate_configs
from stir.evaluation.experiments import run, run_shard
from stir.evaluation.publish import publish
from stir.evaluation.report_index import record_report
from stir.evaluation.session import Session
from stir.evaluation.zoo import MissingModelError, UnknownModelError
from stir.training.runs import RecipeMismatchError

REPO = Path(__file__).resolve().parent
log = logging.getLogger("evaluate")
register_evaluate_configs()


@hydra.main(config_path=str(REPO / "configs" / "evaluate"), config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    with one_line_errors(ConfigError, RecipeMismatchError, UnknownModelError, MissingModelError):
        _evaluate(cfg)


def _evaluate(cfg: DictConfig) -> None:
    config = evaluate_config(cfg)  # typed and validated before any work
    session = Session.open(config, repo=REPO)
    if config.shards > 1:  # one process of several: its share of the measurements, no report
        done = run_shard(session, config.shard, config.shards)
        log.info("shard %d/%d stored %d unit(s) of %s; run again without shard/shards for the report",
                 config.shard, config.shards, done, config.experiment.name)
        return
    report = run(session)
    logger = config.logger
    if session.store.misses == 0 and session.store.hits > 0 and not logger.wandb.log_cached:
        # Nothing new was measured: the report is rewritten, but no second W&B run of the same numbers.
        log.info("every result came from the store: no new W&B run (logger.wandb.log_cached=true logs one)")
        logger = dataclasses.replace(logger, wandb=dataclasses.replace(logger.wandb, mode="disabled"))
    wandb_config = {**OmegaConf.to_container(cfg, resolve=True), "models": session.model_references()}
    publish(report, session.out, logger, wandb_config, run_name=f"evaluate/{session.name}",
            tags=[config.experiment.kind, config.measure, config.iri])
    record_report(Path(config.out_dir), session.name, session.out, session.settings)
    log.info("results in %s (latest of its name: %s; all: %s)", session.out, Path(config.out_dir) / session.name,
             Path(config.out_dir) / "index.md")


if __name__ == "__main__":
    main()
