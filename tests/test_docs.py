"""The README, bench/README.md and the documentation site stay what issue 22 asked for."""
import re
import shlex

import yaml

from conftest import REPO

STIR = REPO / "stir"


README_LINES = 120  # the front door's budget (issue 55: 200 lines, a third of them results, were too many; 140, then 120)
FRONT_DOOR = ["## Install", "## The tour", "### Train your own", "## As a library", "## Results", "## Where next",
              "## Citation"]  # in this order


def test_readme_is_a_front_door_within_its_line_budget():
    """What and why, install (measured sizes), the tour, one headline table with its command, links:
    the README fails this test when it grows past its budget or loses one of these (issue 55)."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= README_LINES, len(readme.splitlines())
    headings = [line for line in readme.splitlines() if line.startswith("#")]
    assert [h for h in headings if h in FRONT_DOOR] == FRONT_DOOR, headings
    assert readme.count("<!-- headline-table -->") == 1 and readme.count("<!-- results -->") == 1
    results = readme.split("## Results", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"`python evaluate.py [^`]+`", results), "the headline table names its command"
    assert len(re.findall(r"^\|---", results, re.M)) == 1, "one headline table"
    assert re.search(r"\d+(\.\d+)? GB", readme.split("## Install", 1)[1].split("## The tour", 1)[0]), "measured sizes"
    for page in ("docs/index.md", "docs/paper.md", "docs/architecture.md", "docs/architecture.md#adding-things",
                 "docs/results.md", "docs/evaluation.md#dashboard"):
        assert f"]({page})" in readme, page
    assert "/work/" not in readme and "shared/" not in readme  # nothing that only one machine explains
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", readme):
        assert (REPO / target).exists(), target


def test_every_preset_is_listed_one_click_from_the_readme():
    """The README's presets table moved to docs/presets.md, whose hook renders every preset's YAML."""
    import importlib.util

    assert "](docs/presets.md)" in (REPO / "README.md").read_text()
    spec = importlib.util.spec_from_file_location("presets_hook", REPO / "docs/hooks/presets.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    assert hook.MARKER in (REPO / "docs/presets.md").read_text()


def test_the_changelog_has_version_sections_of_added_changed_fixed():
    text = (REPO / "CHANGELOG.md").read_text()
    versions = re.findall(r"^## (Unreleased|\d+\.\d+\.\d+ \(\d{4}-\d\d-\d\d\))$", text, re.M)
    assert versions[0] == "Unreleased" and len(versions) >= 2, versions
    assert all(h in {"### Added", "### Changed", "### Fixed", "### Removed", "### Deprecated", "### Security"}
               for h in re.findall(r"^### .*$", text, re.M)), re.findall(r"^### .*$", text, re.M)
    assert len(text.splitlines()) <= 200


def test_docs_run_folders_are_the_folders_train_py_makes():
    """docs/training.md's layout is runs.py's, and each documented command's folder (``# ... -> runs/...``)
    is the one ``recipe_dir`` gives its composed config; every other run path the docs name has that shape
    (issue 55: a layout that no longer existed)."""
    from stir.config.loss_specs import loss_names
    from stir.config.store import compose_train
    from stir.training import runs

    text = (REPO / "docs/training.md").read_text()
    layout = re.search(r"^ +(runs/<data>\S+/)$", runs.__doc__, re.M).group(1)
    assert f"`{layout}`" in text
    documented = re.findall(r"^python train.py([^#\n]*)#[^\n]*-> (runs/\S+)$", text, re.M)
    assert len(documented) >= 3
    for overrides, folder in documented:
        assert str(runs.recipe_dir(compose_train(REPO / "configs", overrides.split()))) == folder, (overrides, folder)
    shape = re.compile(r"runs/(cifar10|cifar100)/(resnet18|resnet34|vgg16|vgg19)(-w\d+)?/"
                       rf"({'|'.join(loss_names())})(-[a-z0-9.]+)*/seed\d+")  # the registered losses
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for path in re.findall(r"(?<![\w/<])runs/(?:cifar10|cifar100)/[^\s`)'\"]+", page.read_text()):
            assert shape.match(path), (page.name, path)


def test_documented_commands_parse():
    """Every ``python train.py`` / ``python evaluate.py`` line in a bash block of the README and of
    docs/training.md and docs/evaluation.md passes the command-line check (keys, groups, values)."""
    from stir.cli import check_line
    from stir.config.argv import parse
    from stir.config.commands import train_command
    from stir.experiments.commands import evaluate_command
    from stir.experiments.schema import register_evaluate_configs
    from stir.config.store import register_configs

    register_configs()
    register_evaluate_configs()
    commands = {"train.py": train_command(REPO / "configs"), "evaluate.py": evaluate_command(REPO / "configs/evaluate")}
    checked = 0
    for page in (REPO / "README.md", REPO / "docs/training.md", REPO / "docs/evaluation.md"):
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(), re.S):
            for line in block.splitlines():
                words = shlex.split(line.split(" #", 1)[0])
                if words[:1] != ["python"] or len(words) < 2 or words[1] not in commands:
                    continue
                command, words = commands[words[1]], [w.replace("PATH", "/data/cifar10.tar") for w in words[2:]]
                check_line(parse(words), command)
                checked += 1
    assert checked >= 10


def test_bench_readme_is_short_and_names_every_benchmark():
    text = (REPO / "bench/README.md").read_text()
    assert len(text.splitlines()) <= 80
    for script in sorted((REPO / "bench").glob("bench_*.py")):
        assert script.name in text, script.name


def public_modules() -> list:
    """The public top-level packages and modules of stir (one API page each)."""
    names = [p.name for p in STIR.iterdir() if p.is_dir() and (p / "__init__.py").is_file()]
    names += [p.stem for p in STIR.glob("*.py") if not p.stem.startswith("_")]
    return sorted(n for n in names if not n.startswith("_"))


def test_every_public_module_has_an_api_page_in_the_nav():
    config = (REPO / "mkdocs.yml").read_text()
    nav = yaml.safe_load("nav:" + config.split("\nnav:", 1)[1])["nav"]
    pages = set(re.findall(r"api/(\w+)\.md", yaml.safe_dump(nav)))
    for name in public_modules():
        page = REPO / "docs/api" / f"{name}.md"
        assert page.is_file() and f"::: stir.{name}" in page.read_text(), name
        assert name in pages, name


def test_every_benchmark_has_a_page_and_its_result_files_exist():
    pages = {p.read_text() for p in (REPO / "docs/benchmarks").glob("*.md")}
    text = "\n".join(pages)
    for script in sorted((REPO / "bench").glob("bench_*.py")):
        assert f"`{script.name}`" in text or f"({script.name})" in text or script.name in text, script.name
    for name in re.findall(r"<!-- bench-results: ([\w.-]+) -->", text):
        assert list((REPO / "bench/results").glob(f"{name}.*")), name


def test_ci_builds_the_site_strictly_with_the_docs_extra():
    ci = (REPO / ".ci/run").read_text()
    assert "mkdocs build --strict" in ci and "docs" in ci
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(r"^docs = \[.*mkdocs-material.*mkdocstrings", pyproject, re.M)


def test_the_docs_environment_is_one_list_read_by_ci_the_docs_and_the_docs_extra():
    """docs/requirements.txt is what CI installs and what docs/index.md tells a reader to install,
    and it is pyproject.toml's ``docs`` extra, package for package."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        from pip._vendor import tomli as tomllib
    listed = [line.strip() for line in (REPO / "docs/requirements.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["docs"]
    assert listed == extra
    assert "-r docs/requirements.txt" in (REPO / ".ci/run").read_text()
    assert "-r docs/requirements.txt" in (REPO / "docs/index.md").read_text()


def test_the_readme_installs_and_tests_what_ci_installs_and_tests():
    """A README user runs the tests CI runs: the same extras installed, the same pytest commands."""
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci/run").read_text()
    extras = re.search(r'pip install [^\n]*-e "\.\[([\w,]+)\]"', ci).group(1)
    assert f'pip install -e ".[{extras}]"' in readme
    for command in re.findall(r"^(pytest[^\n#]*)", ci, re.M):
        assert command.strip() in readme, command
