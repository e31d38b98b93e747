"""python train.py [data=cifar10|cifar100] [model=resnet18|...] [loss=vanilla|...] [key=value ...]

Trains one recipe into its run folder (runs/<data>/<arch>/<loss>/seed<seed>/); see README.md and
docs/training.md; ``python train.py --help`` lists every group, key and the page that explains it.
"""
import logging
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

# Light imports only up to the command-line check (no torch, no Lightning): the training is imported
# once the command line is known to be good.
from stir.cli import EXPECTED_ERRORS, check_command_line, one_line_errors
from stir.config import ConfigError
from stir.config.commands import train_command
from stir.config.store import register_configs, train_config

CONFIGS = Path(__file__).resolve().parent / "configs"
log = logging.getLogger("train")
register_configs()


def main() -> None:
    check_command_line(sys.argv[1:], train_command(CONFIGS))  # --help; a mistyped key: one line, exit 2
    run()


@hydra.main(config_path=str(CONFIGS), config_name="train", version_base="1.3")
def run(cfg: DictConfig) -> None:
    from stir.reporting.wandb_log import offline_run_line
    from stir.training.pipeline import train
    from stir.training.runs import RecipeMismatchError

    with one_line_errors(ConfigError, RecipeMismatchError, *EXPECTED_ERRORS):
        config = train_config(cfg)  # typed and validated before any work
        run_dir = train(config)
    log.info("run folder: %s", run_dir)
    said = barely_trained(run_dir, config.data.name)
    if said:
        log.warning("%s", said)
    log.info("%s", offline_run_line(run_dir, config.logger.wandb.mode))


def barely_trained(run_dir: Path, data: str):
    """The line saying the run's model is barely trained (from its metrics.json), or None."""
    import json

    from stir.reporting.models import barely_trained_line

    metrics = Path(run_dir) / "metrics.json"
    if not metrics.is_file():  # another process of a DDP run, or nothing finished
        return None
    return barely_trained_line(data, float(json.loads(metrics.read_text()).get("test/acc", float("nan"))))


if __name__ == "__main__":
    main()
