"""``python tests/inversion/ddp_predict.py OUT``: ``InversionPredictor`` on two gloo DDP processes on the CPU,
as its module docstring shows it (for tests/inversion/test_inversion_predictor.py).

Every rank writes ``OUT/rank<k>.pt`` (``PredictionFiles``); after the barrier rank 0 merges them into
``OUT/merged.pt`` (the result's x', residuals and steps). Lightning launches rank 1 by running this
same command again.
"""
import sys
from pathlib import Path

import lightning as L
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # invtest_utils
from invtest_utils import noise_images, tiny_net  # noqa: E402

from stir.inversion import ExecutionConfig, InversionConfig, InversionPredictor, PredictionFiles  # noqa: E402

CFG = InversionConfig(steps=6, tolerance=0.3)
IMAGES, BATCH = 5, 2  # batches of 2, 2, 1 over two ranks: one rank inverts two batches, the other one


def main() -> None:
    out = Path(sys.argv[1])
    predictor = InversionPredictor(tiny_net(), "logits", CFG, m2=tiny_net(1), run=ExecutionConfig(batch_size=BATCH))
    writer = PredictionFiles(str(out))
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", inference_mode=False, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[writer])
    trainer.predict(predictor, predictor.dataloader(noise_images(IMAGES)), return_predictions=False)
    trainer.strategy.barrier()  # every rank has written its file
    if trainer.is_global_zero:
        merged = writer.merge()
        torch.save({"x_prime": merged.x_prime, "residual": merged.residual, "steps": merged.steps,
                    "m2_distance": merged.m2_distance, "world_size": writer.world_size}, out / "merged.pt")


if __name__ == "__main__":
    main()
