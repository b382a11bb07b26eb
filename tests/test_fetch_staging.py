"""A fetch owns the directory it fills (issue 44, item 6): a fresh private directory beside the
destination, renamed into place only once every sha256 matched. Whatever is planted at a name
a fetch could use — the old predictable staging name, the resume prefix, the destination
itself, as a symlink or a directory with extra files — changes nothing; an interrupted S3
download still resumes, and its kept bytes are hashed again with the rest."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelreg import fetchdir, s3
from modelreg.errors import InvalidInput, NotFetchable
from modelreg.locations import WantedFile, fetch_files, file_url
from tests.hostile.server import MIB, Answer, HostileServer, Pattern, s3_object

FILES = {"model.gguf": b"weights " * 5000, "tokenizer/config.json": b'{"vocab": 49152}'}
NOBODY = 65534


def _wanted(files: dict[str, bytes]) -> list[WantedFile]:
    return [WantedFile(p, len(d), hashlib.sha256(d).hexdigest()) for p, d in files.items()]


def _source(tmp_path: Path, files: dict[str, bytes] = FILES) -> str:
    for name, data in files.items():
        (tmp_path / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / name).write_bytes(data)
    return file_url(tmp_path / "src")


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _planter(tmp_path: Path) -> Path:
    """The planter's directory, with a file that must never reach the destination."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "backdoor.py").write_text("import os; os.system('id')")
    return theirs


def test_planted_symlinks_and_directories_beside_the_destination_change_nothing(
    tmp_path: Path,
) -> None:
    url = _source(tmp_path)
    to = tmp_path / "models"
    theirs = _planter(tmp_path)
    wanted = _wanted(FILES)
    # The name a fetch used to fill (.<to>.fetch-<12 hex of the files>) and names starting
    # with the resume prefix: a symlink to the planter's directory, a directory of theirs
    # with an extra file, a directory of this user's open to others.
    old = hashlib.sha256("\n".join(f"{f.path}\0{f.sha256}" for f in wanted).encode())
    (tmp_path / f".models.fetch-{old.hexdigest()[:12]}").symlink_to(theirs)
    prefix = fetchdir.resume_prefix(to, [(f.path, f.sha256) for f in wanted])
    (tmp_path / f"{prefix}link").symlink_to(theirs)
    for name, owner, mode in [("other", NOBODY, 0o700), ("open", os.geteuid(), 0o777)]:
        planted = tmp_path / f"{prefix}{name}"
        planted.mkdir()
        (planted / "model.gguf").write_bytes(b"weights ")  # a "kept prefix" of the right bytes
        (planted / "backdoor.py").write_text("evil")
        os.chmod(planted, mode)
        os.chown(planted, owner, owner)
        os.chown(planted / "model.gguf", owner, owner)

    fetched, _ = fetch_files(wanted, [url], to)

    assert not to.is_symlink() and stat.S_ISDIR(os.lstat(to).st_mode)
    assert _tree(to) == FILES  # exactly the recorded files: no backdoor.py
    assert sorted(f.path for f in fetched) == sorted(FILES)
    assert _tree(theirs) == {"backdoor.py": b"import os; os.system('id')"}
    # What is not provably this user's own is neither read nor removed.
    assert (tmp_path / f"{prefix}other" / "model.gguf").read_bytes() == b"weights "
    assert (tmp_path / f"{prefix}open" / "model.gguf").read_bytes() == b"weights "


def test_a_symlink_at_the_destination_is_refused(tmp_path: Path) -> None:
    url = _source(tmp_path)
    theirs = _planter(tmp_path)
    to = tmp_path / "models"
    to.symlink_to(theirs)
    with pytest.raises(InvalidInput, match="is a symbolic link and is not an empty directory"):
        fetch_files(_wanted(FILES), [url], to)
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "to-empty").symlink_to(empty)  # even one to an empty directory
    with pytest.raises(InvalidInput, match="is a symbolic link"):
        fetch_files(_wanted(FILES), [url], tmp_path / "to-empty")
    assert _tree(theirs) == {"backdoor.py": b"import os; os.system('id')"}
    assert list(empty.iterdir()) == []


def test_something_planted_at_the_destination_while_fetching_is_not_replaced(
    tmp_path: Path,
) -> None:
    """rename(2) replaces only an empty directory and never follows a symlink: a destination
    that appears during the fetch makes it fail, leaving the planted thing as it was."""
    from modelreg import locations

    url = _source(tmp_path)
    to = tmp_path / "models"
    theirs = _planter(tmp_path)
    real = locations._fetch_all

    def plant_then_fetch(*args: object, **kwargs: object) -> object:
        to.symlink_to(theirs)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    locations._fetch_all = plant_then_fetch  # type: ignore[assignment]
    try:
        with pytest.raises(InvalidInput, match="appeared while the files were fetched"):
            fetch_files(_wanted(FILES), [url], to)
    finally:
        locations._fetch_all = real
    assert to.is_symlink() and _tree(theirs) == {"backdoor.py": b"import os; os.system('id')"}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".models")] == []


@pytest.fixture
def hostile_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[HostileServer]:
    with HostileServer() as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setattr(s3, "RANGE_BACKOFF_S", 0.01)
        monkeypatch.setattr(s3, "PART_BYTES", MIB)
        s3.reset()
        yield server
        s3.reset()


def test_an_interrupted_s3_download_resumes_and_its_kept_bytes_are_hashed_again(
    hostile_s3: HostileServer, tmp_path: Path
) -> None:
    blob = Pattern(3 * MIB + 5)
    key = "/models/m/model.gguf"
    wanted = [WantedFile("model.gguf", blob.size, blob.sha256())]
    to = tmp_path / "out"
    honest = s3_object(blob)

    def cut_after_the_first_range(request):  # type: ignore[no-untyped-def]
        if request.headers.get("Range", "").startswith("bytes=0-"):
            return honest(request)  # type: ignore[operator]
        return Answer(403, b"<Error><Code>AccessDenied</Code></Error>")

    hostile_s3.route("HEAD", key, honest)
    hostile_s3.route("GET", key, cut_after_the_first_range)
    with pytest.raises(NotFetchable, match="resumes from them"):
        fetch_files(wanted, ["s3://models/m/"], to)
    (kept,) = [p for p in tmp_path.iterdir() if p.name.startswith(".out.fetch-")]
    assert (
        stat.S_IMODE(kept.stat().st_mode) == 0o700 and (kept / "model.gguf").stat().st_size == MIB
    )

    # Someone (this user: a stray process) writes other bytes into the kept prefix and an
    # extra file beside it: the whole file's sha256 refuses the result, the extra never moves.
    with (kept / "model.gguf").open("r+b") as fh:
        fh.write(b"X")
    (kept / "extra.bin").write_bytes(b"not recorded")
    hostile_s3.route("GET", key, honest)
    with pytest.raises(NotFetchable, match="MISMATCH"):
        fetch_files(wanted, ["s3://models/m/"], to)
    assert not to.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []

    # A clean interruption resumes: only the missing ranges are asked for the second time.
    hostile_s3.route("GET", key, cut_after_the_first_range)
    with pytest.raises(NotFetchable):
        fetch_files(wanted, ["s3://models/m/"], to)
    hostile_s3.requests.clear()
    hostile_s3.route("GET", key, honest)
    fetch_files(wanted, ["s3://models/m/"], to)
    ranges = [r.headers["Range"] for r in hostile_s3.requests if r.method == "GET"]
    assert sorted(ranges) == [f"bytes={MIB}-{2 * MIB - 1}", f"bytes={2 * MIB}-{3 * MIB - 1}",
                              f"bytes={3 * MIB}-{3 * MIB + 4}"]  # fmt: skip
    assert hashlib.sha256((to / "model.gguf").read_bytes()).hexdigest() == blob.sha256()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []
