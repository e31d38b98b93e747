"""The README, bench/README.md and the documentation site stay what issue 22 asked for."""
import re
import yaml

from conftest import REPO

STIR = REPO / "stir"


def test_readme_is_short_and_holds_the_headline_marker_and_every_preset():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert readme.count("<!-- headline-table -->") == 1
    listed = set(re.findall(r"^\| `(\w+)` \|", readme, re.M))
    assert listed == {p.stem for p in (REPO / "configs/evaluate/experiment").glob("*.yaml")}
    assert "/work/" not in readme and "shared/" not in readme  # nothing that only one machine explains
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        assert (REPO / target).exists(), target


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
