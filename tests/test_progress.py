"""Progress of long work: a bar with an ETA on a terminal, a log line every few percent otherwise."""
import io
import logging
import re

import pytest
import torch

import stir.progress
from stir.progress import Progress


def test_without_a_terminal_a_line_every_five_percent_with_the_eta(caplog, monkeypatch):
    monkeypatch.setattr(stir.progress, "MIN_INTERVAL", 0.0)
    with caplog.at_level(logging.INFO, logger="stir.progress"):
        with Progress(1000, "inverting", "image-step", terminal=False) as bar:
            for _ in range(100):
                bar.update(10, **{"median r1": lambda: 0.0612})
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 21  # 5%, 10%, ..., 100% and the closing line
    assert re.fullmatch(r"inverting: 5% \(50 of 1,000 image-step\), median r1 0\.0612, \d+s, ETA \d+s", lines[0]), lines[0]
    assert lines[-1].startswith("inverting: done (1,000 image-step) in ")


def test_short_work_without_a_terminal_says_nothing(caplog):
    with caplog.at_level(logging.INFO, logger="stir.progress"):
        with Progress(100, "quick", terminal=False) as bar:
            bar.update(100)
    assert not caplog.records  # under MIN_INTERVAL: no line at all


def test_on_a_terminal_a_tqdm_bar_with_the_eta(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr("sys.stderr", out)
    with Progress(200, "inverting", "image-step", terminal=True) as bar:
        for _ in range(20):
            bar.update(10, **{"median r1": 0.05})
    text = out.getvalue()
    assert "inverting" in text and "200/200" in text and "image-step" in text and "<" in text  # elapsed<remaining


def test_disabled_is_silent(caplog, monkeypatch, capsys):
    monkeypatch.setattr(stir.progress, "MIN_INTERVAL", 0.0)
    with caplog.at_level(logging.INFO, logger="stir.progress"):
        with Progress(10, "x", enabled=False, terminal=True) as bar:
            bar.update(10)
    assert not caplog.records and not capsys.readouterr().err


def test_a_1000_image_inversion_logs_images_x_steps_and_the_median_residual(caplog, monkeypatch):
    """The acceptance of issue 22: a 1000-image inversion, not on a terminal, logs every few percent."""
    from stir.config.schema import ModelConfig
    from stir.inversion import ExecutionConfig, InversionConfig, invert
    from stir.models import build

    monkeypatch.setattr(stir.progress, "MIN_INTERVAL", 0.0)
    monkeypatch.setattr(stir.progress, "on_terminal", lambda: False)
    torch.manual_seed(0)
    net = build(ModelConfig("resnet18", 2), 10, (0.5,) * 3, (0.25,) * 3).eval()
    images = torch.rand(1000, 3, 8, 8)
    with caplog.at_level(logging.INFO, logger="stir.progress"):
        invert(net, images, "penultimate", InversionConfig(steps=20, record_steps=()),
               run=ExecutionConfig(batch_size=500, progress=True, warn_below=0))
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("inverting 1000 images (arbitrary IRIs, 1 draw) x 20 steps: 5% (1,000 of 20,000 image-step), "
                               "median r1 "), lines[0]
    assert "ETA" in lines[0] and len(lines) == 21 and lines[-1].startswith("inverting 1000 images")
