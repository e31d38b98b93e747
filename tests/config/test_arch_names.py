"""The torch-free list of architecture names (stir.config.arch_names) reads every @register form the
models use, and refuses, with the place and the fix, a name it cannot read without running the module."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from stir.config.arch_names import arch_names
from stir.config.validate import ConfigError, validate_train


def _module(folder, name, text):
    (folder / f"{name}.py").write_text(textwrap.dedent(text))


def test_literal_and_looped_names_are_read_and_private_modules_and_the_registry_skipped(tmp_path):
    _module(tmp_path, "family", '''
        from stir.models.registry import register
        WIDTHS = (2, 4)

        @register("plain")
        def plain(cfg, n, mean, std): ...

        def _register(width):
            @register(f"wide{width}")
            def builder(cfg, n, mean, std): ...

        for _w in WIDTHS:
            _register(_w)

        for depth in {10: 1, 12: 2}:
            @register(f"deep{depth}_net")
            def deep(cfg, n, mean, std): ...
        ''')
    _module(tmp_path, "_private", '@register("hidden")\ndef f(): ...\n')
    _module(tmp_path, "registry", '@register("no")\ndef f(): ...\n')
    assert arch_names.__wrapped__(tmp_path) == ("deep10_net", "deep12_net", "plain", "wide2", "wide4")


def test_a_name_computed_otherwise_is_refused_with_the_place_and_the_fix(tmp_path):
    _module(tmp_path, "odd", '''
        from stir.models.registry import register
        NAME = "x".upper()

        @register(NAME)
        def odd(cfg, n, mean, std): ...
        ''')
    with pytest.raises(ValueError, match=r"odd.py:5: .*register\(NAME\).*string literal"):
        arch_names.__wrapped__(tmp_path)


def test_the_check_refuses_an_unknown_arch_naming_the_registered_ones():
    from stir.config.schema import TrainConfig

    cfg = TrainConfig()
    cfg.model.arch = "resnet1000"
    with pytest.raises(ConfigError, match=r"model.arch='resnet1000'.*'resnet18'"):
        validate_train(cfg)


def test_reading_the_names_imports_no_torch():
    code = "import sys; from stir.config.validate import ARCH_NAMES; assert ARCH_NAMES; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
