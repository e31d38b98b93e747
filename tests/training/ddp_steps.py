"""``python tests/training/ddp_steps.py OUT override ...``: train.py's pipeline on a composed config, each
process recording its training steps (for tests/training/test_ddp.py).

The recipe is composed as train.py composes it and trained by ``stir.training.pipeline.train`` (what
train.py runs) with one extra callback: every process writes ``OUT/rank<k>.json``, per training step
the loss, the batch size and a digest of each (unaugmented) image of its batch. Under DDP Lightning
launches the other ranks by running this same command again.
"""
import hashlib
import json
import logging
import sys
from pathlib import Path

import lightning as L

REPO = Path(__file__).resolve().parents[2]


class StepRecorder(L.Callback):
    """Per training step of this process: loss, batch size, image digests (what the step trained on)."""

    def __init__(self, out: Path) -> None:
        self.out, self.steps = out, []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        images, labels = batch
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        digests = [hashlib.sha256(image.cpu().numpy().tobytes()).hexdigest()[:16] for image in images]
        self.steps.append({"loss": float(loss), "batch": len(labels), "images": digests})

    def on_train_end(self, trainer, module) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / f"rank{trainer.global_rank}.json").write_text(json.dumps(self.steps))


def main() -> None:
    from stir.config.store import compose_train
    from stir.training.pipeline import train

    logging.basicConfig(level=logging.INFO)
    out, overrides = Path(sys.argv[1]), sys.argv[2:]
    train(compose_train(REPO / "configs", overrides), callbacks=[StepRecorder(out)])


if __name__ == "__main__":
    main()
