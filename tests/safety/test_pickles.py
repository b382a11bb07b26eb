"""Pickle scanning: hostile pickles (os.system / eval via __reduce__, in a plain pickle, a
torch.save zip, a legacy torch file, a zip in a zip, a TorchScript archive, a Neuron bundle)
are each named with the global they import; real state dicts and TorchScript are clean.
Nothing here is unpickled."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelreg.safety.pickles import (
    UnsafePickleError,
    allowed,
    require_clean,
    scan_pickle_file,
)
from tests.safety import hostile


def _globals(path: Path) -> list[str | None]:
    return [f.global_name for f in scan_pickle_file(path)]


def test_plain_pickle_calling_os_system_names_the_global(tmp_path: Path) -> None:
    path = tmp_path / "model.pkl"
    path.write_bytes(hostile.system_pickle())
    (finding,) = scan_pickle_file(path)
    assert finding.global_name == "posix.system" and finding.member is None
    assert "known to run code" in finding.message


@pytest.mark.parametrize("protocol", [0, 2, 4])
def test_eval_pickle_is_found_at_every_protocol(tmp_path: Path, protocol: int) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(hostile.eval_pickle(protocol))
    assert _globals(path) in (["builtins.eval"], ["__builtin__.eval"])


def test_torch_save_zip_payload_is_named_with_its_member(tmp_path: Path) -> None:
    path = hostile.torch_save_hostile(tmp_path / "pytorch_model.bin")
    (finding,) = scan_pickle_file(path)
    assert finding.global_name == "posix.system"
    assert finding.member == "pytorch_model/data.pkl"


def test_legacy_torch_file_payload_is_found(tmp_path: Path) -> None:
    path = hostile.torch_save_hostile(tmp_path / "model.pt", legacy=True)
    assert _globals(path) == ["posix.system"]


def test_pickle_in_a_zip_in_a_zip_is_found(tmp_path: Path) -> None:
    (finding,) = scan_pickle_file(hostile.nested_zip(tmp_path / "weights.zip"))
    assert finding.member == "inner.zip!/weights/model.pkl"
    assert finding.global_name in ("builtins.eval", "__builtin__.eval")


def test_torchscript_archive_payload_is_found(tmp_path: Path) -> None:
    (finding,) = scan_pickle_file(hostile.torchscript_hostile(tmp_path / "model.pt"))
    assert finding.global_name == "posix.system"
    assert finding.member is not None and finding.member.endswith("/constants.pkl")


def test_unknown_global_is_held_even_if_no_denylist_names_it(tmp_path: Path) -> None:
    import pickle
    import pickletools

    # A class of the standard library nobody reviewed: picklescan calls it suspicious only.
    data = pickletools.optimize(pickle.dumps(__import__("fractions").Fraction(1, 3)))
    path = tmp_path / "x.pkl"
    path.write_bytes(data)
    (finding,) = scan_pickle_file(path)
    assert finding.global_name == "fractions.Fraction"
    assert "not on the allow-list" in finding.message
    assert not allowed("fractions", "Fraction") and allowed("torch._utils", "_rebuild_tensor_v2")


@pytest.mark.parametrize("legacy", [False, True])
def test_real_state_dict_is_clean(tmp_path: Path, legacy: bool) -> None:
    assert scan_pickle_file(hostile.torch_save_benign(tmp_path / "model.pt", legacy=legacy)) == []


def test_real_torchscript_is_clean(tmp_path: Path) -> None:
    assert scan_pickle_file(hostile.torchscript_benign(tmp_path / "model.pt")) == []


def test_truncated_pickle_is_unknown_not_clean(tmp_path: Path) -> None:
    path = tmp_path / "model.pkl"
    path.write_bytes(hostile.system_pickle()[:-3])
    assert None in _globals(path)


def test_require_clean_refuses_before_loading(tmp_path: Path) -> None:
    bad = hostile.torch_save_hostile(tmp_path / "embed_tokens.pt")
    good = hostile.torch_save_benign(tmp_path / "ok.pt")
    require_clean([good])
    with pytest.raises(UnsafePickleError, match=r"embed_tokens.pt: .*posix.system.*not loaded"):
        require_clean([good, bad])


def test_a_deflate_bomb_member_is_not_clean_and_not_read_past_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A torch zip whose data.pkl inflates past the bound (256 MiB; 1 MiB here) is a finding,
    read no further: a few KB on disk never cost the scanner more than the bound."""
    import zipfile

    from modelreg.safety import pickles

    monkeypatch.setattr(pickles, "MAX_MEMBER_BYTES", 1 << 20)
    path = tmp_path / "model.pt"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/data.pkl", b"\x80\x02" + b"\x00" * (4 << 20))
    assert path.stat().st_size < 64 << 10
    (finding,) = scan_pickle_file(path)
    assert finding.member == "archive/data.pkl" and finding.global_name is None
    assert "larger than 1 MiB uncompressed: not scanned" in finding.message
    with pytest.raises(UnsafePickleError):
        require_clean([path])
