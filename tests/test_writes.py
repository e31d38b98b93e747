"""Every file stir/ and bench/ write goes through ``stir.atomic`` (issue 32), seen with the AST (tests/write_scan.py).

A kill or a full disk during a plain ``open(path, "w")`` leaves a truncated file that the next run
reads or trusts; ``stir.atomic`` writes a temp file beside it, fsyncs it and renames it over. The
few writes that must not be atomic are listed in ``EXEMPT`` with the reason.
"""
import textwrap
from pathlib import Path

from write_scan import scan

REPO = Path(__file__).resolve().parents[1]

# (path, enclosing function, call) -> why it is not written through stir.atomic
EXEMPT = {
    ("stir/training/pipeline.py", "_log_to", "logging.FileHandler"):
        "train.log is a log stream appended to record by record, by every attempt of a run (a resumed run "
        "continues the file): rewriting it whole per record would be quadratic and a kill loses at most the "
        "last line, never the lines before it",
    ("stir/training/trainer.py", "_AtomicExperimentWriter.log_hparams", "save_hparams_to_yaml"):
        "Lightning's YAML writer takes a path only: it writes a hidden staged file, which is read back, "
        "written to hparams.yaml with stir.atomic.write_bytes and removed; a kill leaves the staged file, "
        "never a truncated hparams.yaml",
}


def test_stir_and_bench_write_files_only_through_stir_atomic():
    found = scan(REPO)
    direct = [str(w) for w in found if (w.path, w.scope, w.call) not in EXEMPT]
    assert not direct, ("files written outside stir.atomic (use stir.atomic.write_text / write_bytes / write_json / "
                        "torch_save / write_figure, or add the call to EXEMPT with the reason):\n" + "\n".join(direct))


def test_each_exemption_names_one_write_that_exists():
    found = [(w.path, w.scope, w.call) for w in scan(REPO)]
    assert {key: found.count(key) for key in EXEMPT} == {key: 1 for key in EXEMPT}


PLANTED = {
    "open_w": 'def f(p):\n    with open(p, "w") as fh:\n        fh.write("x")\n',
    "open_mode_kw": 'def f(p):\n    return open(p, mode="ab")\n',
    "path_open": 'def f(p):\n    return p.open("w")\n',
    "write_text": 'def f(p):\n    p.write_text("x")\n',
    "write_bytes": 'from pathlib import Path\nPath("x").write_bytes(b"x")\n',
    "json_dump": 'import json\ndef f(obj, fh):\n    json.dump(obj, fh)\n',
    "savefig": 'def f(fig, p):\n    fig.savefig(p, dpi=100)\n',
    "torch_save": 'import torch\ndef f(m, p):\n    torch.save(m.state_dict(), p)\n',
    "np_save": 'import numpy as np\ndef f(a):\n    np.save("a.npy", a)\n',
    "pil_save": 'def f(image, p):\n    image.save(p, format="PNG")\n',
    "csv_writer": 'import csv\ndef f(fh):\n    return csv.writer(fh)\n',
    "tar": 'import tarfile\ndef f(p):\n    return tarfile.open(p, "w:gz")\n',
    "os_open": 'import os\ndef f(p):\n    return os.open(p, os.O_WRONLY | os.O_CREAT)\n',
    "method": 'class A:\n    def write(self):\n        self.out.write_text("x")\n',
}


def test_the_scanner_reports_a_planted_write_of_each_form(tmp_path):
    for i, (name, code) in enumerate(PLANTED.items()):
        folder = tmp_path / ("stir" if i % 2 else "bench") / "sub"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.py").write_text(code)
    reported = {Path(w.path).stem for w in scan(tmp_path)}
    assert reported == set(PLANTED), f"missed: {sorted(set(PLANTED) - reported)}"
    scopes = {Path(w.path).stem: w.scope for w in scan(tmp_path)}
    assert scopes["method"] == "A.write" and scopes["write_bytes"] == "<module>"


def test_the_scanner_passes_atomic_writes_and_in_memory_buffers(tmp_path):
    (tmp_path / "stir").mkdir()
    (tmp_path / "stir" / "ok.py").write_text(textwrap.dedent('''
        import csv, io, json, tarfile
        import torch
        from PIL import Image
        from stir import atomic
        from stir.atomic import write_text as wt

        def f(p, fig, obj, image):
            atomic.write_text(p, "x")
            wt(p, "x")
            buffer = io.BytesIO()
            torch.save(obj, buffer)
            fig.savefig(buffer, format="png")
            image.save(buffer, format="PNG")
            with tarfile.open(name=str(p), mode="w:gz", fileobj=buffer) as tar:
                pass
            text = io.StringIO()
            csv.writer(text)
            json.dump(obj, text)
            with open(p) as fh:  # reading
                fh.read()
            with Image.open(p) as im:  # reading
                pass
            return p.open()
    '''))
    (tmp_path / "stir" / "atomic.py").write_text('def write_bytes(p, b):\n    open(p, "wb").write(b)\n')
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.py").write_text('open("x", "w")\n')  # not under stir/ or bench/
    assert scan(tmp_path) == []
    assert [w.call for w in scan(tmp_path, folders=())] == ["open"]

