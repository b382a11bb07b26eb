"""The CLI conventions people expect: --version, -h, shell completion, messages that say what
to type instead, history's filters."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import modelreg
from tests.helpers import add_synthetic, record_run


def test_version_and_short_help(cli) -> None:
    code, out, _ = cli("--version")
    assert (code, out) == (0, f"modelreg {modelreg.__version__}\n")
    code, out, _ = cli("-h")
    assert code == 0 and out.startswith("Usage: modelreg") and "webhooks" in out
    code, out, _ = cli("history", "-h")
    assert code == 0 and "--since" in out and "--limit" in out


def test_completion_scripts_complete_commands_in_a_real_shell() -> None:
    modelreg_bin = os.path.join(os.path.dirname(sys.executable), "modelreg")
    script = subprocess.run(
        [modelreg_bin, "completion", "bash"], capture_output=True, text=True, check=True
    ).stdout
    assert "_MODELREG_COMPLETE=complete_bash" in script
    probe = (
        f"{script}\nCOMP_WORDS=(modelreg webhooks a); COMP_CWORD=2; "
        f'_modelreg_completion {modelreg_bin}; echo "${{COMPREPLY[@]}}"'
    )
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["add"]
    for shell in ("zsh", "fish"):
        assert (
            subprocess.run([modelreg_bin, "completion", shell], capture_output=True).returncode == 0
        )
    bad = subprocess.run([modelreg_bin, "completion", "tcsh"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr == (
        "error: no completion for shell 'tcsh' — give bash, zsh or fish\n"
    )


def test_show_of_a_model_id_says_what_to_type(cli) -> None:
    code, _, err = cli("show", "HuggingFaceTB/SmolLM2-135M-Instruct")
    assert code == 2 and err == (
        "error: 'HuggingFaceTB/SmolLM2-135M-Instruct' is a model id; a record id is r_ and 12 "
        "hex digits (or a prefix) — list the model's records: modelreg list --model "
        "HuggingFaceTB/SmolLM2-135M-Instruct\n"
    )


def test_history_filters_by_count_time_and_target(cli) -> None:
    registry = modelreg.open()
    r1, r2 = add_synthetic(registry, 1), add_synthetic(registry, 2)
    record_run(registry, r1)
    record_run(registry, r2, "inf2.xlarge")
    registry.hold(r2, "audit")
    code, out, _ = cli("history", "rules/alpha", "--json")
    kinds = [e["kind"] for e in json.loads(out)["events"]]
    assert code == 0 and kinds.count("add") == 2 and kinds[-1] == "hold"

    code, out, _ = cli("history", "rules/alpha", "--limit", "2", "--json")
    assert [e["kind"] for e in json.loads(out)["events"]] == kinds[-2:]
    code, out, _ = cli("history", "rules/alpha", "--target", "cpu", "--json")
    targets = {e["target"] for e in json.loads(out)["events"]}
    assert targets == {None, "cpu"}
    code, out, _ = cli("history", "rules/alpha", "--since", "1h", "--json")
    assert [e["kind"] for e in json.loads(out)["events"]] == kinds
    code, out, _ = cli("history", "rules/alpha", "--since", "2999-01-01", "--json")
    assert json.loads(out)["events"] == []
    code, out, err = cli("history", "rules/alpha", "--since", "last tuesday")
    assert (code, out) == (2, "") and err == (
        "error: --since 'last tuesday' is not a date, a time or an age — e.g. 2026-11-30, "
        "2026-11-30T09:00Z, 12h or 7d\n"
    )
    code, out, err = cli("history", "rules/alpha", "--since", "999999d")
    assert (code, out) == (2, "") and err == (
        "error: --since '999999d' reaches before year 1 — e.g. 12h, 7d or 365d\n"
    )


def test_release_needs_a_why_like_hold_and_retire(cli) -> None:
    import pytest

    from modelreg.errors import InvalidInput

    registry = modelreg.open()
    record = add_synthetic(registry, 1)
    assert cli("hold", record, "--why", "audit")[0] == 0
    code, out, err = cli("release", record)
    assert (code, out) == (2, "") and "Missing option '--why'" in err
    code, _, err = cli("release", record, "--why", " ")
    assert code == 2 and err == "error: release needs a reason — give one as --why\n"
    with pytest.raises(InvalidInput, match="release needs a reason"):
        registry.release(record, "")
    assert registry.show(record).record.state.state == "held"
    code, _, err = cli("release", record, "--why", "audit done")
    assert (code, err) == (0, f"{record} released\n")
    (released,) = [e for e in registry.history("rules/alpha").events if e.kind == "release"]
    assert released.why == "audit done"


def test_release_of_a_record_held_for_unknown_facts_says_what_lifts_it(cli, tmp_path) -> None:
    from tests.helpers import write_gguf

    path = write_gguf(tmp_path / "m.gguf", {"token_embd.weight": (64, 16)})
    code, out, _ = cli("add", path, "--model-id", "t/m", "--json")
    added = json.loads(out)["record"]
    record, reasons = added["record_id"], added["hold_reasons"]
    assert [r.split(":")[0] for r in reasons] == ["source unknown", "license unknown"]
    code, out, err = cli("release", record, "--why", "looks fine")
    assert (code, out) == (2, "")
    assert err == (
        f"error: record {record} is held because its manifest does not know or contradicts "
        f"facts: {'; '.join(reasons)} — release cannot lift that (it lifts a hold someone "
        "put): add the artifact again with the missing facts, as each reason says — the facts "
        "are the record's identity, so that is a new record\n"
    )
    # The advice works: the same bytes with the facts are another record, not held.
    facts = ("--model-id", "t/m", "--source", "pypi://t-m==1.0", "--license", "mit")
    code, out, _ = cli("add", path, *facts, "--json")
    again = json.loads(out)["record"]
    assert code == 0 and again["record_id"] != record and again["hold_reasons"] == []
    assert modelreg.open().show(record).record.state.state == "active"  # nothing written


def test_retirement_is_final_and_the_message_says_so_truly(cli, tmp_path) -> None:
    from tests.helpers import write_gguf

    path = write_gguf(tmp_path / "m.gguf", {"token_embd.weight": (64, 16)})
    facts = ("--model-id", "t/m", "--source", "pypi://t-m==1.0", "--license", "mit")
    record = cli("add", path, *facts)[1].strip()
    assert cli("retire", record, "--why", "superseded")[0] == 0
    for command in ("release", "hold"):
        code, out, err = cli(command, record, "--why", "bring it back")
        assert (code, out) == (2, "") and err == (
            f"error: record {record} is retired; retired records stay retired — retirement is "
            "final: the same bytes and facts added again are this record, still retired — only "
            "a changed artifact or changed facts (a new build, another source pin) make a new "
            "record\n"
        )
    # What the message says: adding the same bytes and facts again gives the retired record…
    code, out, err = cli("add", path, *facts)
    assert (code, out.strip()) == (0, record)
    assert f"{record} is retired (superseded)" in err and "stays retired" in err
    assert modelreg.open().show(record).record.state.state == "retired"
    # …and changed facts make a new record, not retired.
    code, out, _ = cli("add", path, *facts[:3], "pypi://t-m==1.1", *facts[4:], "--json")
    again = json.loads(out)["record"]
    assert code == 0 and again["record_id"] != record and again["state"]["state"] == "active"


def test_a_suite_key_it_does_not_know_shows_the_accepted_form(cli, tmp_path) -> None:
    suite = tmp_path / "paris.yaml"
    suite.write_text(
        "name: paris\nthresholds: {min_pass_rate: 1.0}\ncases:\n"
        "  - {id: capital, prompt: 'Capital of France?', expect: {contains: Paris}}\n"
    )
    code, out, err = cli("suite", "check", suite)
    assert (code, out) == (2, "") and err == (
        f"error: {suite}: case 'capital' (#1) field expect.contains: Extra inputs are not "
        "permitted — 'contains' is a value of mode, not a key (mode: contains); expect accepts: "
        "mode (contains, exact, regex, one_of, json, not_contains), value, values, reject, "
        "json_schema, case_sensitive\n"
    )
    # A misspelt key is reported as such, not as the key it then lacks.
    suite.write_text(
        "name: paris\nthreshold: {min_pass_rate: 1.0}\ncases:\n"
        "  - {id: capital, prompt: 'Capital of France?', expect: {mode: contains, value: Paris}}\n"
    )
    code, _, err = cli("suite", "check", suite)
    assert code == 2 and err == (
        f"error: {suite}: field threshold: Extra inputs are not permitted — did you mean "
        "'thresholds'? a suite accepts: schema_version, name, description, thresholds, cases, "
        "latency\n"
    )
    suite.write_text(
        suite.read_text().replace("threshold:", "thresholds:")[:-2] + ", max_token: 8}\n"
    )
    code, _, err = cli("suite", "check", suite)
    assert code == 2 and err.endswith(
        "field max_token: Extra inputs are not permitted — did you mean 'max_tokens'? a case "
        "accepts: id, prompt, expect, subset, max_tokens, chat, note, long_context\n"
    )


def test_unknown_figures_say_unknown_and_rates_keep_their_digits(cli, tmp_path) -> None:
    from modelreg.schemas.suite import Resources, SuiteResult
    from modelreg.validators.smoke import describe_result
    from tests.helpers import write_gguf

    path = write_gguf(
        tmp_path / "m.gguf", {"token_embd.weight": (64, 16)}, metadata={"llama.block_count": 2}
    )
    code, out, _ = cli("inspect", path)
    assert code == 0 and "None" not in out
    assert "arch       llama  layers 2  (hidden, heads, kv heads, context unknown)\n" in out
    add_synthetic(modelreg.open(), 1)  # no quantization recorded
    code, out, _ = cli("list")
    assert out.splitlines()[1].split()[5:7] == ["1,001", "unknown"]  # params, bits/weight
    slow = SuiteResult.model_construct(
        suite_name="s", cases=[], subsets=[], resources=Resources(decode_tokens_per_s=0.46)
    )
    assert describe_result(slow) == "suite s: 0/0 passed; decode 0.46 tok/s"


def test_inspect_takes_adds_manifest_options_and_gives_its_record_id(cli, tmp_path) -> None:
    """A published Neuron bundle states no host figures: declared on the build host with
    inspect, they are the facts add records, and the JSON POST /api/v1/records takes."""
    from tests.manifests.test_neuron_bundles import BASE_MODEL, MODEL_ID, SOURCE, _slim_bundle

    bundle = _slim_bundle(tmp_path / "bundle", deploy_host=None, compile_host=None)
    options = (
        *("--model-id", MODEL_ID, "--source", SOURCE, "--license", "gemma"),
        *("--base-model", BASE_MODEL, "--deploy-peak-gib", "10.5", "--deploy-swap-gib", "37"),
        *("--cold-start-seconds", "95", "--compile-peak-gib", "168"),
        *("--host-source", "https://example.org/deploy-log"),
    )
    code, out, err = cli("inspect", bundle, *options, "--json")
    assert code == 0, err
    inspected = json.loads(out)
    deploy = inspected["manifest"]["neuron"]["deploy_host"]
    assert deploy["peak_rss_bytes"] == int(10.5 * (1 << 30)) and deploy["seconds"] == 95
    code, out, _ = cli("add", bundle, *options, "--json")
    added = json.loads(out)["record"]["record_id"]
    assert code == 0 and added == inspected["record_id"]
    without = json.loads(cli("inspect", bundle, *options[:8], "--json")[1])["record_id"]
    assert without != added  # the host figures are facts of the record

    from tests.server.conftest import serving

    with serving(f"sqlite:///{tmp_path / 'team.db'}") as served:
        token = served.registry.create_token("ci", "verifier", actor="admin").secret
        with served.client(token) as client:
            posted = client.post("/api/v1/records", json=inspected)
    assert posted.status_code == 201, posted.text
    assert posted.json()["record"]["record_id"] == added
