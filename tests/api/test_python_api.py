"""The Python API as a notebook uses it: typed keywords that a typo names the called function
for, a registry that closes (also as a context manager), no internal parameter in sight."""

from __future__ import annotations

import inspect as pyinspect
from pathlib import Path

import pytest

import modelreg
from modelreg.api.offline import FitOptions, ManifestOptions


def test_a_misspelled_keyword_is_refused_by_the_method_called(
    tmp_path: Path, smollm2: Path
) -> None:
    with modelreg.open(f"sqlite:///{tmp_path / 'r.db'}") as registry:
        with pytest.raises(
            TypeError, match=r"^add\(\) got an unexpected keyword argument 'model_idd'$"
        ):
            registry.add([smollm2], model_idd="a/b")  # type: ignore[call-arg]
        with pytest.raises(TypeError, match=r"^inspect\(\) got an unexpected keyword argument"):
            registry.inspect([smollm2], sourse="pypi://x==1")  # type: ignore[call-arg]
        with pytest.raises(TypeError, match=r"^fit\(\) got an unexpected keyword argument 'ctx'"):
            registry.fit("r_000000000000", "cpu", ctx=4096)  # type: ignore[call-arg]
        assert registry.records().records == []  # nothing was written


def test_the_registry_closes_and_reopens_on_use(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with modelreg.open(url) as registry:
        assert registry.models() == []
        pool = registry.store.engine.pool
        assert pool.checkedin() >= 1  # the connection that answered is back in the pool
    assert registry.store.engine.pool is not pool  # disposed: a new, empty pool
    assert registry.models() == []  # a later call opens new connections
    registry.close()


def test_public_signatures_are_typed_and_hide_internals() -> None:
    verify = pyinspect.signature(modelreg.Registry.verify)
    assert "prestarted" in verify.parameters  # public, documented: no private parameter
    for name, member in vars(modelreg.Registry).items():
        if name.startswith("_") or not callable(member):
            continue
        parameters = pyinspect.signature(member).parameters
        assert not [p for p in parameters if p.startswith("_")], name
    for method in (modelreg.Registry.add, modelreg.Registry.inspect, modelreg.Registry.fit):
        kinds = {p.kind for p in pyinspect.signature(method).parameters.values()}
        assert pyinspect.Parameter.VAR_KEYWORD in kinds  # **options: Unpack[...], checked
    # The options are the keywords of modelreg.inspect / the fit report, one for one.
    assert set(ManifestOptions.__annotations__) == {
        name
        for name, p in pyinspect.signature(modelreg.inspect).parameters.items()
        if p.kind is pyinspect.Parameter.KEYWORD_ONLY
    }
    from modelreg.manifests.fit_report import fit_report

    assert set(FitOptions.__annotations__) == {
        name
        for name, p in pyinspect.signature(fit_report).parameters.items()
        if p.kind is pyinspect.Parameter.KEYWORD_ONLY
    }


def test_prompt_rules_hold_for_every_caller_not_only_the_cli(tmp_path: Path, smollm2: Path) -> None:
    """``expect`` without ``prompts`` and blank prompts are refused by the library itself (the
    CLI, POST /api/v1/records' inspect JSON and a notebook go through the same rule)."""
    from modelreg.errors import InvalidInput

    with modelreg.open(f"sqlite:///{tmp_path / 'r.db'}") as registry:
        with pytest.raises(InvalidInput, match=r"^`expect` needs `prompts` — "):
            registry.inspect([smollm2], expect="Lyon")
        with pytest.raises(InvalidInput, match="must not be empty"):
            registry.add([smollm2], model_id="a/b", source="pypi://x==1", prompts=[" "])
        assert registry.records().records == []


def test_fit_of_a_record_id_is_the_record_even_where_a_file_has_that_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.helpers import add_synthetic

    with modelreg.open(f"sqlite:///{tmp_path / 'r.db'}") as registry:
        record_id = add_synthetic(registry, 1)
        monkeypatch.chdir(tmp_path)
        (tmp_path / record_id).mkdir()  # a directory named like the record
        assert registry.fit(record_id, "cpu").record == record_id
