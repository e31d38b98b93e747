"""Issue 67, item 4: the trust root is pinned. The shipped manifest's sha256 is a constant of the
package (stir/manifest.py), checked whenever the shipped manifest is read; a copy of a shipped
entry in a results store is compared with the pinned entry each time it is served."""
import hashlib
import json

import pytest

from conftest import REPO
from stir import manifest
from stir.manifest import SHIPPED_MANIFEST_SHA256


def test_the_pinned_constant_is_the_sha256_of_the_shipped_manifest():
    digest = hashlib.sha256((REPO / "zoo" / manifest.MANIFEST).read_bytes()).hexdigest()
    assert digest == SHIPPED_MANIFEST_SHA256, (
        f"zoo/MANIFEST.sha256 changed: run {manifest.WRITE_COMMAND}, or set in stir/manifest.py: "
        f'SHIPPED_MANIFEST_SHA256 = "{digest}"')


@pytest.fixture
def restored():
    """The shipped zoo's manifest and one shipped entry, restored byte for byte after the test."""
    entry = sorted((REPO / "zoo" / "store" / "direction").glob("*.json"))[0]
    saved = {p: p.read_bytes() for p in (REPO / "zoo" / manifest.MANIFEST, entry, manifest.PIN_FILE)}
    yield entry
    for path, data in saved.items():
        path.write_bytes(data)


def test_an_edited_entry_with_an_edited_manifest_line_is_refused_in_one_line(restored, capsys):
    from stir.zoo.manifest import main

    entry = restored
    data = json.loads(entry.read_text())
    data["timestamp"] = "edited"
    entry.write_text(json.dumps(data))
    path = REPO / "zoo" / manifest.MANIFEST
    name = entry.relative_to(REPO / "zoo").as_posix()
    new = hashlib.sha256(entry.read_bytes()).hexdigest()
    path.write_text("".join(f"{new}  {name}\n" if line.endswith(f"  {name}") else f"{line}\n"
                            for line in path.read_text().splitlines()))
    with pytest.raises(SystemExit) as done:
        main([])
    err = capsys.readouterr().err.strip().splitlines()
    assert done.value.code == 2 and err[0].startswith(f"error: {path} has sha256"), err
    assert "stir/manifest.py pins" in err[0] and manifest.WRITE_COMMAND in err[0]


def test_the_write_command_rewrites_the_manifest_and_the_pin(restored, capsys):
    from stir.zoo.manifest import main

    restored.write_text(restored.read_text() + " ")  # a maintainer's change, shipped on purpose
    main(["--write"])
    digest = hashlib.sha256((REPO / "zoo" / manifest.MANIFEST).read_bytes()).hexdigest()
    assert manifest.pinned_sha256() == digest != SHIPPED_MANIFEST_SHA256
    main([])  # the check passes again


def test_a_copy_of_a_shipped_entry_edited_in_the_store_is_not_served(tmp_path, caplog):
    from stir.store import ResultStore

    shipped = REPO / "zoo" / "store"
    entry = sorted((shipped / "direction").glob("*.json"))[0]
    store = ResultStore(tmp_path / "store", shipped=shipped)
    first = store.get("direction", entry.stem)
    assert first is not None and store.shipped_hits == 1
    copy = tmp_path / "store" / "direction" / entry.name
    edited = json.loads(copy.read_text())
    edited["record"] = {"edited": True}
    copy.write_text(json.dumps(edited))
    again = ResultStore(tmp_path / "store", shipped=shipped).get("direction", entry.stem)
    assert again == first and "differs from the shipped entry" in caplog.text
    assert (tmp_path / "store" / "direction" / f"{entry.name}.corrupt").is_file()


def small_zoo(repo):
    """A zoo folder inside ``repo`` whose shipped store's direction/ is two pinned entries."""
    zoo = repo / "zoo"
    (zoo / "store" / "direction").mkdir(parents=True)
    for name in ("a", "b"):
        (zoo / "store" / "direction" / f"{name}.json").write_text(json.dumps({"key": name}))
    manifest.write(zoo)
    return zoo


@pytest.mark.parametrize("inside", [True, False])
def test_a_symlinked_shipped_folder_is_read_through_inside_the_repository_and_named_outside(tmp_path, capsys, inside):
    """Issue 67 item 5: a symlinked zoo/store/direction was refused as "missing (and 1 more)" though its
    files were there. Inside the repository it is read through (every file checked against its pin);
    outside, the refusal says it is a link and how to put the folder back."""
    from stir.zoo.manifest import main

    zoo = small_zoo(tmp_path / "repo")
    target = (tmp_path / "repo" / "data" if inside else tmp_path / "elsewhere") / "direction"
    target.parent.mkdir()
    (zoo / "store" / "direction").rename(target)
    (zoo / "store" / "direction").symlink_to(target)
    if inside:
        main([str(zoo)])  # passes: no SystemExit
        (target / "a.json").write_text("{}")  # read through the link: an edit there is still refused
    with pytest.raises(SystemExit) as done:
        main([str(zoo)])
    err = capsys.readouterr().err.strip().splitlines()[0]
    assert done.value.code == 2 and "missing" not in err
    if inside:
        assert err.startswith(f"error: {zoo / 'store' / 'direction' / 'a.json'} has sha256"), err
    else:
        assert err == (f"error: {zoo / 'store' / 'direction'} is a symbolic link to {target}, outside the repository "
                       f"{tmp_path / 'repo'}: shipped files are read only from inside it; replace the link by the "
                       f"folder itself (rm {zoo / 'store' / 'direction'} && git checkout -- zoo/store/direction)")
