"""Multi-device inversions through Lightning's Trainer.predict, checked on one CPU device."""
import lightning as L
import pytest
import torch

from invtest_utils import noise_images, tiny_net
from stir.inversion import ExecutionConfig, InversionConfig, InversionPredictor, PredictionFiles, invert, invert_adversarial
from stir.inversion import merge_predictions




def _trainer(**kwargs) -> L.Trainer:
    return L.Trainer(
        accelerator="cpu", devices=1, inference_mode=False, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, **kwargs,
    )


def _assert_same(a, b):
    assert torch.allclose(a.x_prime, b.x_prime, atol=1e-5)
    assert torch.allclose(a.residual, b.residual, atol=1e-5)
    assert torch.equal(a.steps, b.steps) and a.evaluations == b.evaluations
    assert a.history.shape == b.history.shape and a.fraction_iri == b.fraction_iri


def test_predict_matches_invert():
    m1, m2, x = tiny_net(), tiny_net(1), noise_images(5)
    m1.train()  # Lightning's predict loop and the engine must both leave it as it was
    cfg = InversionConfig(steps=6, tolerance=0.3)
    predictor = InversionPredictor(m1, "logits", cfg, m2=m2, run=ExecutionConfig(batch_size=2))  # batches of 2, 2, 1
    merged = merge_predictions(_trainer().predict(predictor, predictor.dataloader(x)))
    _assert_same(merged, invert(m1, x, "logits", cfg, m2=m2))
    assert torch.allclose(merged.m2_distance, invert(m1, x, "logits", cfg, m2=m2).m2_distance, atol=1e-5)
    assert m1.training and all(m.training for m in m1.modules()) and not m2.training
    assert all(p.requires_grad for p in m1.parameters())


def test_adversarial_predict_and_per_rank_files(tmp_path):
    m1, m2, x = tiny_net(), tiny_net(1), noise_images(4)
    cfg = InversionConfig(steps=4)
    predictor = InversionPredictor(m1, "logits", cfg, m2=m2, adversarial=True, run=ExecutionConfig(batch_size=3))
    writer = PredictionFiles(str(tmp_path))
    trainer = _trainer(callbacks=[writer])
    trainer.predict(predictor, predictor.dataloader(x), return_predictions=False)
    trainer.strategy.barrier()
    assert (tmp_path / "rank0.pt").exists()
    _assert_same(writer.merge(), invert_adversarial(m1, m2, x, "logits", cfg=cfg))


def test_inference_mode_is_refused():
    predictor = InversionPredictor(tiny_net(), "logits", InversionConfig(steps=2))
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                        enable_model_summary=False)
    with pytest.raises(RuntimeError, match="inference_mode=False"):
        trainer.predict(predictor, predictor.dataloader(noise_images(2)))


def test_merge_rejects_missing_or_repeated_rows():
    cfg = InversionConfig(steps=2)
    predictor = InversionPredictor(tiny_net(), "logits", cfg, run=ExecutionConfig(batch_size=2))
    predictions = _trainer().predict(predictor, predictor.dataloader(noise_images(4)))
    with pytest.raises(ValueError, match="once"):
        merge_predictions(predictions[:1] + predictions[:1])
    shuffled = merge_predictions(predictions[::-1])  # any order of batches
    assert torch.equal(shuffled.x_prime, merge_predictions(predictions).x_prime)


@pytest.mark.slow  # ~15 s: two gloo processes, each importing torch and Lightning
def test_two_ddp_processes_invert_as_invert_does(tmp_path):
    """The multi-GPU path on two CPU processes: each image inverted once, the merged x' equal to invert's."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import ddp_predict

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(repo)}
    done = subprocess.run([sys.executable, str(Path(ddp_predict.__file__)), str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert sorted(p.name for p in tmp_path.glob("rank*.pt")) == ["rank0.pt", "rank1.pt"]
    merged = torch.load(tmp_path / "merged.pt", weights_only=True)
    assert merged["world_size"] == 2
    expected = invert(tiny_net(), noise_images(ddp_predict.IMAGES), "logits", ddp_predict.CFG, m2=tiny_net(1))
    assert torch.allclose(merged["x_prime"], expected.x_prime, atol=1e-5)
    assert torch.allclose(merged["residual"], expected.residual, atol=1e-5)
    assert torch.equal(merged["steps"], expected.steps)
    assert torch.allclose(merged["m2_distance"], expected.m2_distance, atol=1e-5)
