"""Write the hostile-input corpus (run: python -m tests.corpus.make_corpus).

Each entry is a file (or a directory, for checkpoints) that modelreg must reject with one clear
line and exit 2, without changing the database. CASES maps a path to the command that reads it
and the exit code expected; test_corpus checks every case and that the files on disk are what
this script writes.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from modelreg.registry.transfer import export_text
from tests.helpers import gguf_string, kv_nested_array, kv_str, kv_u32, raw_gguf, tensor_info

HERE = Path(__file__).resolve().parent
# Deep enough that a recursive reader (json.loads, a recursive GGUF array walk) would end in a
# RecursionError rather than a one-line error.
DEEP = 5000


def _st(header: bytes, data: bytes = b"", declared: int | None = None) -> bytes:
    return struct.pack("<Q", len(header) if declared is None else declared) + header + data


def _valid_gguf() -> bytes:
    return raw_gguf(
        kvs=[kv_str("general.architecture", "llama"), kv_str("general.name", "corpus")],
        tensors=[tensor_info("token_embd.weight", [8, 4])],
        data=b"\0" * 128,
    )


def _sections() -> dict[str, int]:
    """Byte offsets where each section of the valid GGUF ends."""
    kv_end = (
        24 + len(kv_str("general.architecture", "llama")) + len(kv_str("general.name", "corpus"))
    )
    return {
        "magic": 2,
        "version": 6,
        "counts": 20,
        "kv": kv_end - 3,
        "tensor-info": kv_end + 10,
        "data": len(_valid_gguf()) - 64,
    }


def _record_id(manifest: dict[str, Any]) -> str:
    """The record id an import expects for ``manifest``, computed without validating its
    (hostile) model id."""
    from modelreg.schemas.manifest import Manifest

    valid = Manifest.model_validate({**manifest, "model_id": "a/b"})
    return valid.model_copy(update={"model_id": manifest["model_id"]}).record_id


def entries() -> dict[str, bytes]:
    valid = _valid_gguf()
    files = {
        "gguf/bad-magic.gguf": b"GGML" + valid[4:],
        "gguf/version-1.gguf": raw_gguf(version=1),
        "gguf/version-99.gguf": raw_gguf(version=99),
        "gguf/kv-count-2e60.gguf": raw_gguf(kv_count=2**60),
        "gguf/tensor-count-2e40.gguf": raw_gguf(tensor_count=2**40),
        "gguf/string-past-eof.gguf": raw_gguf(kvs=[kv_str("general.name", "x", 10**9)]),
        "gguf/n-dims-9.gguf": raw_gguf(tensors=[tensor_info("w", [1] * 9)]),
        "gguf/tensor-offset-past-eof.gguf": raw_gguf(
            tensors=[tensor_info("w", [32], offset=1 << 20)], data=b"\0" * 128
        ),
        "gguf/misaligned-offset.gguf": raw_gguf(
            tensors=[tensor_info("w", [8], offset=3)], data=b"\0" * 128
        ),
        "gguf/duplicate-tensor.gguf": raw_gguf(
            tensors=[tensor_info("w", [8]), tensor_info("w", [8], offset=32)], data=b"\0" * 128
        ),
        "gguf/non-utf8-key.gguf": raw_gguf(kvs=[kv_u32(b"\xff\xfe", 1)]),
        "gguf/alignment-0.gguf": raw_gguf(kvs=[kv_u32("general.alignment", 0)]),
        "gguf/alignment-3.gguf": raw_gguf(kvs=[kv_u32("general.alignment", 3)]),
        "gguf/unknown-value-type.gguf": raw_gguf(
            kvs=[gguf_string("k") + struct.pack("<I", 77) + b"\0" * 8]
        ),
        "gguf/empty.gguf": b"",
        # Not an error: unknown tensor types are recorded as unknown and hold the record.
        "gguf/unknown-tensor-type.gguf": raw_gguf(
            kvs=[kv_str("general.license", "mit")],
            tensors=[tensor_info("w", [32], ggml_type=140)],
            data=b"\0" * 64,
        ),
    }
    for section, cut in _sections().items():
        files[f"gguf/truncated-in-{section}.gguf"] = valid[:cut]
    files["gguf/nested-arrays-5000-deep.gguf"] = raw_gguf(kvs=[kv_nested_array("x", DEEP)])
    deep_json = "[" * DEEP + "]" * DEEP
    tensor = b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    files |= {
        "safetensors/header-longer-than-file/model.safetensors": _st(b"{}", declared=10**6),
        "safetensors/header-not-json/model.safetensors": _st(b"{not json"),
        "safetensors/overlapping-offsets/model.safetensors": _st(
            b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
            b'"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}',
            b"\0" * 12,
        ),
        "safetensors/offsets-past-end/model.safetensors": _st(
            b'{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}', b"\0" * 8
        ),
        "safetensors/index-names-missing-shard/model.safetensors.index.json": json.dumps(
            {"weight_map": {"a": "model-00002-of-00002.safetensors"}}
        ).encode(),
        "safetensors/config-not-json/config.json": b"{oops",
        "safetensors/config-not-json/model.safetensors": _st(tensor, b"\0" * 4),
        "safetensors/header-nested-json/model.safetensors": _st(
            f'{{"a":{{"dtype":"F32","shape":{deep_json},"data_offsets":[0,4]}}}}'.encode(),
            b"\0" * 4,
        ),
        "safetensors/config-nested-json/config.json": f'{{"text_config":{deep_json}}}'.encode(),
        "safetensors/config-nested-json/model.safetensors": _st(tensor, b"\0" * 4),
        # a reference manifest given to diff
        "references/manifest-nested-json.json": f'{{"model_id":{deep_json}}}'.encode(),
    }
    header = {"type": "header", "format": "modelreg-export", "version": 2, "schema": "0004"}
    record = {
        "type": "record",
        "id": "r_000000000000",
        "root": "/x",
        "created_by": "x",
        "created_at": "2026-01-01T00:00:00+00:00",
        "manifest": {
            "model_id": "a/b",
            "format": "gguf",
            "runtime": {"runtime": "llama.cpp"},
            "files": [{"path": "m.gguf", "bytes": 1, "sha256": "0" * 64}],
        },
    }
    for name, change in {
        "path-traversal": {"path": "../../etc/passwd"},
        "absolute-path": {"path": "/etc/passwd"},
    }.items():
        hostile = json.loads(json.dumps(record))
        hostile["manifest"]["files"][0] |= change
        files[f"manifests/{name}.jsonl"] = export_text([header, hostile]).encode()
    unknown = json.loads(json.dumps(record))
    unknown["manifest"]["surprise"] = "field"
    files["manifests/unknown-field.jsonl"] = export_text([header, unknown]).encode()
    for name, model_id in {
        "model-id-trailing-newline": "org/name\n",  # "$" in a pattern lets this through
        "model-id-confusable": "gооgle/gemma-3-270m",  # Cyrillic о
        "model-id-too-long": "org/" + "n" * 150,  # fits the column, not the 96-character part
    }.items():
        hostile = json.loads(json.dumps(record))
        hostile["manifest"]["model_id"] = model_id
        hostile["id"] = _record_id(hostile["manifest"])  # the id is right: only the name is not
        model = {"type": "model", "model_id": model_id, "created_at": record["created_at"]}
        files[f"manifests/{name}.jsonl"] = export_text([header, model, hostile]).encode()
    bomb = ["---", 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        bomb.append(f"{chr(97 + i)}: &{chr(97 + i)} [" + ",".join([f"*{chr(96 + i)}"] * 9) + "]")
    files["cards/alias-bomb.md"] = ("\n".join([*bomb, "license: mit", "---", "# x"])).encode()
    files["cards/deep-nesting.md"] = ("---\nx: " + "[" * 20000 + "]" * 20000 + "\n---\n").encode()
    files["cards/invalid-yaml.md"] = b"---\nlicense: [unclosed\n---\n"
    files["cards/not-utf8.md"] = b"---\nlicense: \xff\xfe\n---\n"
    # Blank lines before the front matter: a check of the first characters would miss it.
    files["cards/anchor-after-blank-lines.md"] = b"\n \n---\nlicense: mit\nx: &a [1]\ny: *a\n---\n"
    files["cards/license-injects-table-row.md"] = (
        b'---\nlicense: "mit |\\n| injected | row |<script>alert(1)</script><!--"\n---\n# x\n'
    )
    files.update(_round_two(header, record))
    files.update(_round_three(header, record))
    # Read with `add … --recipe`: an anchor after ordinary lines.
    files["recipes/anchor-after-comment.yaml"] = (
        b"# quantizer settings\ntool: llama-quantize\nscheme: &s Q4_K_M\nnotes: *s\n"
    )
    return files


def _round_three(header: dict[str, Any], record: dict[str, Any]) -> dict[str, bytes]:
    """Hostile classes of the third round: values that could be stored but not read back, and
    times that are not points in time — each refused by the storage boundary on import."""
    files: dict[str, bytes] = {}
    model = {"type": "model", "model_id": "a/b", "created_at": record["created_at"]}
    poisoned = json.loads(json.dumps(record))
    poisoned["manifest"]["notes"] = ["x\ud800"]
    poisoned["id"] = _record_id(poisoned["manifest"])
    files["imports/lone-surrogate-in-notes.jsonl"] = export_text([header, model, poisoned]).encode()
    good = json.loads(json.dumps(record))
    good["id"] = _record_id(good["manifest"])
    run = {
        "type": "run",
        "run_id": "1" * 32,
        "record_id": good["id"],
        "target": "cpu",
        "origin": "local",
        "origin_detail": None,
        "envelope_json": None,
        "signer_key_id": None,
        "created_at": record["created_at"],
    }
    check = {
        "type": "verification",
        "run_id": run["run_id"],
        "record_id": good["id"],
        "target": "cpu",
        "check": "digest",
        "required": True,
        "outcome": "pass",
        "classification": None,
        "summary": "",
        "evidence_json": json.dumps({"deep": json.loads("[" * 270 + "]" * 270)}),
        "host": "h",
        "started_at": record["created_at"],
        "finished_at": record["created_at"],
        "fingerprint_json": "{}",
    }
    files["imports/evidence-nested-270-deep.jsonl"] = export_text(
        [header, model, good, run, check]
    ).encode()
    surrogate = dict(check, evidence_json=json.dumps({"host": "x\ud800"}))
    files["imports/lone-surrogate-in-evidence.jsonl"] = export_text(
        [header, model, good, run, surrogate]
    ).encode()
    naive = dict(good, created_at="2026-01-01T00:00:00")
    files["imports/time-without-offset.jsonl"] = export_text([header, model, naive]).encode()
    location = {
        "type": "location",
        "record_id": good["id"],
        "url": "s3://bucket/x\ud800",
        "added_at": record["created_at"],
        "added_by": "x",
    }
    files["imports/lone-surrogate-in-location.jsonl"] = export_text(
        [header, model, good, location]
    ).encode()
    return files


def _round_two(header: dict[str, Any], record: dict[str, Any]) -> dict[str, bytes]:
    """Hostile classes of the second round: imports, bundles, targets, suites, signatures."""
    files: dict[str, bytes] = {}
    model = {"type": "model", "model_id": "a/b", "created_at": record["created_at"]}
    # An import line nested deeper than any reader should follow (RecursionError before).
    deep = {"type": "event", "detail_json": "{}", "at": record["created_at"], "actor": "x"}
    deep_line = json.dumps(deep)[:-1] + ', "kind": ' + "[" * DEEP + "]" * DEEP + "}"
    body = json.dumps(header) + "\n" + deep_line + "\n"
    files["imports/nested-line.jsonl"] = body.encode()
    # A verification whose run the file does not declare, and an outcome that is no outcome.
    verification = {
        "type": "verification",
        "run_id": "0" * 32,
        "record_id": record["id"],
        "target": "cpu",
        "check": "digest",
        "required": True,
        "outcome": "totally-passed",
        "classification": None,
        "summary": "",
        "evidence_json": "{}",
        "host": "h",
        "started_at": record["created_at"],
        "finished_at": record["created_at"],
        "fingerprint_json": "{}",
    }
    good_record = json.loads(json.dumps(record))
    good_record["id"] = _record_id(good_record["manifest"])
    files["imports/verification-without-run.jsonl"] = export_text(
        [header, model, good_record, verification]
    ).encode()
    # Neuron bundle configs with values of the wrong type.
    files["bundles/tp-degree-is-text/neuron_config.json"] = json.dumps(
        {"model_type": "llama", "hidden_size": 64, "neuron_config": {"tp_degree": "two"}}
    ).encode()
    files["bundles/hidden-size-is-text/neuron_config.json"] = json.dumps(
        {"model_type": "llama", "hidden_size": "sixty-four", "neuron_config": {"tp_degree": 2}}
    ).encode()
    # Targets files: an infinite memory, a number too large for any column, an alias.
    files["targets/memory-infinite.yaml"] = b"targets:\n  edge:\n    memory_gib: .inf\n"
    files["targets/memory-overflows.yaml"] = (
        b"targets:\n  edge:\n    memory_gib: 1" + b"0" * 400 + b"\n"
    )
    files["targets/alias-after-comment.yaml"] = (
        b"# fleet\ntargets:\n  a: &t {memory_gib: 8}\n  b: *t\n"
    )
    files["targets/name-too-long.yaml"] = b"targets:\n  " + b"t" * 150 + b":\n    memory_gib: 8\n"
    # Suites: no cases, a threshold out of range, a JSON Schema that is not one.
    files["suites/no-cases.yaml"] = b"name: empty\nthresholds: {min_pass_rate: 0.5}\ncases: []\n"
    files["suites/threshold-out-of-range.yaml"] = (
        b"name: s\nthresholds: {min_pass_rate: 7}\ncases:\n"
        b"  - {id: a, prompt: hi, expect: {mode: contains, value: hi}}\n"
    )
    files["suites/invalid-json-schema.yaml"] = (
        b"name: s\nthresholds: {min_pass_rate: 0.5}\ncases:\n"
        b"  - {id: a, prompt: hi, expect: {mode: json, json_schema: {type: 12}}}\n"
    )
    # Signature bundles: not JSON, and an envelope that is not an in-toto statement.
    files["signatures/not-json.sig"] = b"\x00\x01 not a bundle"
    files["signatures/wrong-payload-type.sig"] = json.dumps(
        {"dsseEnvelope": {"payloadType": "text/plain", "payload": "aGk=", "signatures": []}}
    ).encode()
    return files


def main() -> None:
    for name, data in entries().items():
        path = HERE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        print(path.relative_to(HERE))


if __name__ == "__main__":
    main()
