"""Inversions spread over devices with Lightning: ``Trainer.predict`` over batches of images.

``Trainer.predict`` hands every batch to exactly one device (its distributed sampler does not repeat
samples, unlike validate/test), so a DDP run inverts each image once. Each batch carries its row
numbers and its seed images (drawn for the whole set on the CPU, as ``invert`` draws them), so the
merged result equals ``invert``'s up to floating-point rounding, however the batches are spread.

    predictor = InversionPredictor(m1, "penultimate", cfg)
    writer = PredictionFiles("out/inversions")          # one file per rank
    trainer = lightning.Trainer(accelerator="gpu", devices=4, strategy="ddp", inference_mode=False,
                                logger=False, enable_checkpointing=False, callbacks=[writer])
    trainer.predict(predictor, predictor.dataloader(images), return_predictions=False)
    trainer.strategy.barrier()                           # every rank has written its file
    result = writer.merge() if trainer.is_global_zero else None

On one device ``merge_predictions(trainer.predict(predictor, loader))`` does the same without
files. Predict runs under ``inference_mode`` by default, where no gradient can be taken: the
Trainer needs ``inference_mode=False`` (checked), and the step enables gradients itself. The
Trainer moves the models to its device; the cache (``run.cache_dir``) is not consulted here.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import lightning as L
import torch
from lightning.pytorch.callbacks import BasePredictionWriter
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from stir.atomic import torch_save
from stir.untrusted import load_plain
from stir.inversion.config import ExecutionConfig, InversionConfig
from stir.inversion.engine import Problem, solve
from stir.inversion.result import InversionResult
from stir.inversion.seeds import make_seed, seed_generator

Prediction = Tuple[Tensor, InversionResult]  # (rows (b,), the batch's result on the CPU)


class InversionPredictor(L.LightningModule):
    """A LightningModule whose ``predict_step`` inverts one batch (rows, images, seeds).

    Arbitrary IRIs of ``m1`` at ``tap1`` (``m2`` at ``tap2`` measured), or adversarial ones with
    ``adversarial=True``; the same settings ``cfg`` as ``invert``.
    """

    def __init__(
        self,
        m1: nn.Module,
        tap1: str,
        cfg: Optional[InversionConfig] = None,
        *,
        m2: Optional[nn.Module] = None,
        tap2: Optional[str] = None,
        adversarial: bool = False,
        run: Optional[ExecutionConfig] = None,
    ):
        super().__init__()
        self.m1, self.m2 = m1, m2  # submodules: the Trainer moves them to its device
        self.tap1, self.tap2, self.adversarial = tap1, tap2, adversarial
        self.cfg = cfg or InversionConfig()
        self.run = run or ExecutionConfig()

    def dataloader(self, images: Tensor) -> DataLoader:
        """Batches of (rows, images, seeds) over ``images`` (n, c, h, w), in order, ``run.batch_size`` each
        (``run.eval_batch_size`` when it is automatic: the loader is built before any device is known)."""
        seeds = make_seed(self.cfg.seed_kind, images, seed_generator(self.cfg.seed))
        rows = torch.arange(images.shape[0])
        return DataLoader(TensorDataset(rows, images.detach().cpu(), seeds.cpu()), batch_size=self.run.eval_batch_size)

    def on_predict_start(self) -> None:
        if self.trainer.predict_loop.inference_mode:
            raise RuntimeError("inversions take gradients: build the Trainer with inference_mode=False")

    def predict_step(self, batch: Sequence[Tensor], batch_idx: int) -> Prediction:
        rows, images, seeds = batch
        problem = Problem(self.m1, self.tap1, self.m2, self.tap2, self.adversarial)
        with torch.enable_grad():
            result = solve(problem, images, seeds, self.cfg, run=self.run)
        return rows.cpu(), _to_cpu(result)


def _to_cpu(r: InversionResult) -> InversionResult:
    move = lambda t: None if t is None else t.detach().cpu()  # noqa: E731
    return InversionResult(
        x_prime=move(r.x_prime), residual=move(r.residual), m2_distance=move(r.m2_distance),
        l2_to_original=move(r.l2_to_original), steps=move(r.steps), evaluations=r.evaluations,
        is_iri=move(r.is_iri), fraction_iri=r.fraction_iri, tolerance=r.tolerance,
        history=move(r.history), elapsed=move(r.elapsed), from_cache=r.from_cache,
        snapshots={t: move(x) for t, x in r.snapshots.items()},
        snapshot_residual={t: move(x) for t, x in r.snapshot_residual.items()},
    )


def merge_predictions(predictions: Sequence[Prediction]) -> InversionResult:
    """One result, rows in their original order, from the (rows, result) of every batch (any order).

    ``evaluations`` and ``elapsed`` are summed over batches (device-seconds on several devices).
    """
    rows = torch.cat([r for r, _ in predictions])
    order = torch.argsort(rows)
    if not torch.equal(rows[order], torch.arange(len(rows))):
        raise ValueError(f"predictions cover rows {rows.tolist()[:20]}..., not each of 0..{len(rows) - 1} once")
    parts = [p for _, p in predictions]
    cat = lambda name, dim=0: torch.cat([getattr(p, name) for p in parts], dim=dim)  # noqa: E731
    residual = cat("residual")[order]
    tolerance = parts[0].tolerance
    is_iri = residual <= tolerance
    return InversionResult(
        x_prime=cat("x_prime")[order],
        residual=residual,
        m2_distance=None if parts[0].m2_distance is None else cat("m2_distance")[order],
        l2_to_original=cat("l2_to_original")[order],
        steps=cat("steps")[order],
        evaluations=sum(p.evaluations for p in parts),
        is_iri=is_iri,
        fraction_iri=is_iri.float().mean().item(),
        tolerance=tolerance,
        history=cat("history", 1)[:, order],
        elapsed=torch.stack([p.elapsed for p in parts]).sum(0),
        snapshots={t: torch.cat([p.snapshots[t] for p in parts])[order] for t in parts[0].snapshots},
        snapshot_residual={t: torch.cat([p.snapshot_residual[t] for p in parts])[order] for t in parts[0].snapshot_residual},
    )


class PredictionFiles(BasePredictionWriter):
    """Writes each rank's predictions to ``<folder>/rank<k>.pt`` at the end of predict; ``merge`` joins them."""

    def __init__(self, folder: str):
        super().__init__(write_interval="epoch")
        self.folder = Path(folder)
        self.world_size = 1

    def write_on_epoch_end(self, trainer, pl_module, predictions, batch_indices) -> None:
        self.world_size = trainer.world_size
        torch_save([(rows, vars(result)) for rows, result in predictions], self.folder / f"rank{trainer.global_rank}.pt")

    def merge(self) -> InversionResult:
        """Every rank's predictions as one result (call after a barrier)."""
        predictions: List[Prediction] = []
        for rank in range(self.world_size):  # not a glob: files of an earlier, larger run stay out
            for rows, fields in load_plain(self.folder / f"rank{rank}.pt"):
                predictions.append((rows, InversionResult(**fields)))
        return merge_predictions(predictions)
