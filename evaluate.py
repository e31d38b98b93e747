"""python evaluate.py ref=NAME target=NAME [key=value ...] | experiment=NAME [profile=cpu]

Directional STIR, STIR_adv, plain similarity, prediction agreement and controversial-stimulus
difficulty between zoo models (configs/zoo.yaml), run folders, checkpoints or models of other
sources; every STIR with its floor, ceiling and interval. See README.md and docs/evaluation.md;
``python evaluate.py --help`` lists every group, preset, key and the page that explains it.
"""
import logging
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

# Light imports only up to the command-line check (no torch, no Lightning): the schema's dataclasses,
# Hydra and OmegaConf; the application is imported once the command line is known to be good.
from stir.cli import EXPECTED_ERRORS, check_command_line, one_line_errors
from stir.config import ConfigError
from stir.experiments.before_imports import check_command
from stir.experiments.commands import evaluate_command
from stir.experiments.schema import register_evaluate_configs

REPO = Path(__file__).resolve().parent
log = logging.getLogger("evaluate")
register_evaluate_configs()


def main() -> None:
    command = evaluate_command(REPO / "configs" / "evaluate")
    check_command_line(sys.argv[1:], command)  # --help; typos: one line
    check_command(sys.argv[1:], command, REPO)  # a misspelt model, a missing data file or weights: one line, before torch
    run()


@hydra.main(config_path=str(REPO / "configs" / "evaluate"), config_name="evaluate", version_base="1.3")
def run(cfg: DictConfig) -> None:
    from stir.models.sources import SourceError
    from stir.training.runs import RecipeMismatchError
    from stir.zoo import MissingModelError, UnknownModelError

    try:
        with one_line_errors(ConfigError, RecipeMismatchError, UnknownModelError, MissingModelError, SourceError,
                             *EXPECTED_ERRORS, memory_hint="lower execution.batch_size (images per inversion batch) or n"):
            evaluate(cfg)
    except KeyboardInterrupt:  # Ctrl-C: what was kept and how to go on, not a traceback
        interrupted(Path(cfg.out_dir) / "store")


def interrupted(store: Path) -> None:
    """One line after Ctrl-C, exit status 130 (128 + SIGINT): every measurement finished before it is in the
    results store (one atomic file each), and the same command serves them from there and measures the rest."""
    print(f"\ninterrupted: the measurements finished so far are kept in the results store {store}; run the same "
          "command again to resume (it serves them from there and measures the rest)", file=sys.stderr)
    sys.exit(130)


def evaluate(cfg: DictConfig) -> None:
    from stir import experiments
    from stir.experiments.config import evaluate_config
    from stir.experiments.context import open_context
    from stir.reporting.publish import publish_evaluation
    from stir.reporting.wandb_log import offline_run_line

    config, experiment = evaluate_config(cfg)  # typed and checked before any work
    ctx = open_context(config, experiment, repo=REPO)
    if config.shards > 1:  # one process of several: its share of the measurements, no report
        done = experiments.run_shard(ctx, experiment, config.shard, config.shards)
        log.info("shard %d/%d stored %d unit(s) of %s; run again without shard/shards for the report",
                 config.shard, config.shards, done, experiment.name)
        return
    report = experiments.run(ctx, experiment)
    published = experiments.publication(ctx, experiment)
    out = publish_evaluation(report, Path(config.out_dir), logger=config.logger, **published)
    log.info("%s", offline_run_line(out, config.logger.wandb.mode))  # W&B's one line; where the results are, last
    log.info("results in %s (the latest of its name and profile: %s/README.md; on exactly these models: %s; "
             "all: %s)", out, Path(config.out_dir) / published["latest"],
             Path(config.out_dir) / (published["exact"] or published["latest"]), Path(config.out_dir) / "index.md")


if __name__ == "__main__":
    main()
