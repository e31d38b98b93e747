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
from stir.experiments.commands import evaluate_command
from stir.experiments.schema import register_evaluate_configs

REPO = Path(__file__).resolve().parent
log = logging.getLogger("evaluate")
register_evaluate_configs()


def main() -> None:
    check_command_line(sys.argv[1:], evaluate_command(REPO / "configs" / "evaluate"))  # --help; typos: one line
    run()


@hydra.main(config_path=str(REPO / "configs" / "evaluate"), config_name="evaluate", version_base="1.3")
def run(cfg: DictConfig) -> None:
    from stir.models.sources import SourceError
    from stir.training.runs import RecipeMismatchError
    from stir.zoo import MissingModelError, UnknownModelError

    with one_line_errors(ConfigError, RecipeMismatchError, UnknownModelError, MissingModelError, SourceError,
                         *EXPECTED_ERRORS, memory_hint="lower execution.batch_size (images per inversion batch) or n"):
        evaluate(cfg)


def evaluate(cfg: DictConfig) -> None:
    from stir import experiments
    from stir.experiments.config import evaluate_config
    from stir.experiments.context import open_context
    from stir.reporting import slug
    from stir.reporting.index import check_report_dir, models_settings, record_report, report_dir, report_settings
    from stir.reporting.publish import publish_once

    config, experiment = evaluate_config(cfg)  # typed and checked before any work
    ctx = open_context(config, experiment, repo=REPO)
    if config.shards > 1:  # one process of several: its share of the measurements, no report
        done = experiments.run_shard(ctx, experiment, config.shard, config.shards)
        log.info("shard %d/%d stored %d unit(s) of %s; run again without shard/shards for the report",
                 config.shard, config.shards, done, experiment.name)
        return
    report = experiments.run(ctx, experiment)
    name = slug(experiment.name if experiment.kind != "pair" else f"pair_{ctx.role('ref').label}_vs_{ctx.role('target').label}")
    settings = models_settings(report_settings(ctx.config),
                               {label: m.identity for label, m in ctx.zoo.resolved().items()})
    out = report_dir(Path(config.out_dir), name, settings)
    check_report_dir(Path(config.out_dir), out)  # never through a symbolic link, never outside out_dir
    wandb_config = {**ctx.config, "models": {label: m.record for label, m in ctx.zoo.resolved().items()}}
    publish_once(report, out, config.logger, wandb_config, run_name=f"evaluate/{name}",
                 tags=[experiment.kind, config.measure, config.iri], nothing_new=ctx.store.misses == 0 and ctx.store.hits > 0)
    record_report(Path(config.out_dir), name, out, settings)
    log.info("results in %s (latest of its name: %s; all: %s)", out, Path(config.out_dir) / name,
             Path(config.out_dir) / "index.md")


if __name__ == "__main__":
    main()
