"""Signatures: artifacts signed with the OpenSSF model-signing format, and verify runs signed
as in-toto statements in DSSE envelopes. The cryptography is the ``cryptography`` package's
(ECDSA over P-256/P-384/P-521, the curves model-signing supports); this module only encodes
(DSSE's pre-authentication encoding, in-toto statements) and decides what a signature covers.

Key ids are the sha256 of the public key's PEM (SubjectPublicKeyInfo) — the "hint"
model-signing writes into its bundles — so one key file identifies a signer in both formats.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelreg.errors import InvalidInput, ModelregError
from modelreg.jsonio import parse_json
from modelreg.steps import Step

if TYPE_CHECKING:
    from modelreg.targets import TrustedKey

IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
IN_TOTO_STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
MODEL_SIGNING_PREDICATE = "https://model_signing/signature/v1.0"
RUN_PREDICATE = "https://modelreg.dev/verification-run/v1"
MAX_KEY_BYTES = 64 << 10
MAX_BUNDLE_BYTES = 16 << 20
_CURVES = {"secp256r1", "secp384r1", "secp521r1"}


class SignatureInvalid(ModelregError):
    """A signature does not verify, or does not cover what it claims (exit 1)."""

    exit_code = 1


def _hash_for(key: Any) -> Any:
    from cryptography.hazmat.primitives import hashes

    return {256: hashes.SHA256(), 384: hashes.SHA384(), 521: hashes.SHA512()}[key.curve.key_size]


def _read(path: Path, what: str, limit: int) -> bytes:
    from modelreg.boundedfile import read_bounded

    return read_bounded(path, max_bytes=limit, what=what)


def load_private_key(path: Path | str) -> Any:
    """An EC private key (unencrypted PEM) from a key file; one-line error naming the file.

    ``$MODELREG_SIGNING_KEY`` may hold the key itself rather than a path (CI secrets are
    usually given so): a value that is key material (several lines, PEM armour, or a long run
    of base64 — ``modelreg.secrets.looks_like_key_material``) is read as the key, and an error
    then names the variable, never its value. Key material given any other way (``--sign-key``,
    visible to every process on the host) is refused, unquoted."""
    from modelreg.secrets import SIGNING_KEY_ENV, looks_like_key_material

    if not looks_like_key_material(str(path)):
        return _private_key(_read(Path(path), "private key", MAX_KEY_BYTES), str(path))
    material = os.environ.get(SIGNING_KEY_ENV, "")
    if not material or Path(material) != Path(path):
        raise InvalidInput(
            "the signing key path holds key material, not a path to a key file "
            "(its value is not shown)",
            f"give the key file's path, or put the key itself in ${SIGNING_KEY_ENV}",
        )
    data = material.strip().encode("utf-8", "surrogateescape")
    if len(data) > MAX_KEY_BYTES:
        raise InvalidInput(f"${SIGNING_KEY_ENV}: key material larger than {MAX_KEY_BYTES} bytes")
    if b"-----" not in data:  # bare base64 (DER): armour it as PEM
        data = b"-----BEGIN PRIVATE KEY-----\n" + data + b"\n-----END PRIVATE KEY-----\n"
    return _private_key(data, f"${SIGNING_KEY_ENV} (key material)")


def _private_key(data: bytes, where: str) -> Any:
    """The EC private key in PEM ``data``; errors name ``where`` (a file, or the variable)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InvalidInput(
            f"{where}: not a usable PEM private key ({reason})",
            "make one with: openssl ecparam -name prime256v1 -genkey -noout -out key.pem",
        ) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name not in _CURVES:
        raise InvalidInput(
            f"{where}: a {type(key).__name__} key; signing needs an EC key on P-256, P-384 or "
            "P-521 (the curves model-signing supports)"
        )
    return key


def load_public_key(path: Path) -> Any:
    """An EC public key from a PEM file; one-line error naming the file."""
    return public_key_from_pem(_read(path, "public key", MAX_KEY_BYTES), str(path))


def public_key_from_pem(data: bytes, where: str) -> Any:
    """An EC public key from PEM bytes; one-line error naming ``where`` it came from."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise InvalidInput(
            f"{where}: not a PEM public key ({str(exc).splitlines()[0]})",
            "export one with: openssl ec -in key.pem -pubout -out key.pub",
        ) from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name not in _CURVES:
        raise InvalidInput(f"{where}: a {type(key).__name__}; trusted keys are EC P-256/384/521")
    return key


def key_id(public_key: Any) -> str:
    """sha256 of the public key's PEM: the id model-signing bundles carry as their hint."""
    from cryptography.hazmat.primitives import serialization

    pem = public_key.public_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PublicFormat.SubjectPublicKeyInfo,
    )
    return hashlib.sha256(pem).hexdigest()


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding (the bytes that are signed)."""
    header = f"DSSEv1 {len(payload_type)} {payload_type} {len(payload)} "
    return header.encode() + payload


def canonical(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def sign_statement(statement: dict[str, Any], private_key: Any) -> dict[str, Any]:
    """A DSSE envelope (JSON form) over ``statement``, signed with ``private_key``."""
    from cryptography.hazmat.primitives.asymmetric import ec

    payload = canonical(statement)
    signature = private_key.sign(
        pae(IN_TOTO_PAYLOAD_TYPE, payload), ec.ECDSA(_hash_for(private_key))
    )
    return {
        "payloadType": IN_TOTO_PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode(),
        "signatures": [
            {"keyid": key_id(private_key.public_key()), "sig": base64.b64encode(signature).decode()}
        ],
    }


def _b64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise SignatureInvalid(f"{what} is not base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise SignatureInvalid(f"{what} is not base64") from None


def verify_envelope(envelope: dict[str, Any], trusted: dict[str, Any]) -> tuple[Any, str]:
    """The statement inside ``envelope`` and the id of the trusted key whose signature over it
    verifies. ``trusted``: key id -> public key. Raises ``SignatureInvalid``."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric import ec

    if not isinstance(envelope, dict) or envelope.get("payloadType") != IN_TOTO_PAYLOAD_TYPE:
        raise SignatureInvalid("not a DSSE envelope of an in-toto statement")
    payload = _b64(envelope.get("payload"), "the envelope's payload")
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise SignatureInvalid("the envelope carries no signature")
    if not all(isinstance(s, dict) and isinstance(s.get("keyid"), str | None) for s in signatures):
        raise SignatureInvalid("the envelope's signatures are malformed")
    signed_by = [s.get("keyid") for s in signatures]
    for entry in signatures:
        keys = [trusted[entry["keyid"]]] if entry.get("keyid") in trusted else []
        if not entry.get("keyid"):
            keys = list(trusted.values())  # no hint: try every trusted key
        signature = _b64(entry.get("sig"), "a signature")
        for key in keys:
            try:
                key.verify(signature, pae(IN_TOTO_PAYLOAD_TYPE, payload), ec.ECDSA(_hash_for(key)))
            except InvalidSignature:
                continue
            try:
                return parse_json(payload), key_id(key)
            except ValueError as exc:
                raise SignatureInvalid(f"the signed payload is not usable JSON: {exc}") from None
    known = [k for k in signed_by if k in trusted]
    if known:
        raise SignatureInvalid(f"the signature by key {known[0][:16]}… does not verify")
    shown = ", ".join(f"{k[:16]}…" for k in signed_by if k) or "no key id"
    raise SignatureInvalid(f"signed by a key that is not trusted here ({shown})")


# -- model-signing (OpenSSF) artifact signatures -------------------------------------------


@dataclass(frozen=True)
class ArtifactSignature:
    """What a model-signing bundle says, before its signature is checked."""

    key_hint: str | None
    digests: dict[str, str]  # file name (relative) -> sha256 hex
    hash_type: str
    bundle: dict[str, Any]


def read_artifact_signature(path: Path) -> ArtifactSignature:
    """Parse a bundle written by ``model_signing sign key``: the signer's key id (hint) and the
    per-file digests its statement lists. One-line exit-2 error for anything malformed; the
    signature itself is checked at verify time against the target's trusted keys."""
    data = _read(path, "signature bundle", MAX_BUNDLE_BYTES)
    try:
        parsed = parse_artifact_bundle(parse_json(data))
    except ValueError as exc:
        raise InvalidInput(
            f"{path}: not a signature bundle: not JSON it can read ({exc})"
        ) from None
    except SignatureInvalid as exc:
        raise InvalidInput(f"{path}: not a model-signing bundle: {exc.message}") from None
    return parsed


def parse_artifact_bundle(bundle: Any) -> ArtifactSignature:
    """The structure of a model-signing bundle (no signature check). Raises SignatureInvalid."""
    if not isinstance(bundle, dict):
        raise SignatureInvalid("a bundle is a JSON object")
    envelope = bundle.get("dsseEnvelope")
    if not isinstance(envelope, dict):
        raise SignatureInvalid("no dsseEnvelope")
    statement = _statement(envelope)
    material = bundle.get("verificationMaterial") or {}
    public_key = material.get("publicKey") if isinstance(material, dict) else None
    hint = public_key.get("hint") if isinstance(public_key, dict) else None
    digests, hash_type = _signed_digests(statement)
    return ArtifactSignature(hint if isinstance(hint, str) else None, digests, hash_type, bundle)


def _statement(envelope: dict[str, Any]) -> dict[str, Any]:
    if envelope.get("payloadType") != IN_TOTO_PAYLOAD_TYPE:
        raise SignatureInvalid("its envelope does not hold an in-toto statement")
    try:
        statement = parse_json(_b64(envelope.get("payload"), "the payload"))
    except ValueError as exc:
        raise SignatureInvalid(f"its statement is not usable JSON: {exc}") from None
    if not isinstance(statement, dict) or statement.get("_type") != IN_TOTO_STATEMENT_TYPE:
        raise SignatureInvalid("its payload is not an in-toto v1 statement")
    return statement


def _signed_digests(statement: dict[str, Any]) -> tuple[dict[str, str], str]:
    """file -> digest from a model-signing v1.0 statement, after checking that its subject's
    root digest is the sha256 over the resources' digests (as model-signing computes it)."""
    if statement.get("predicateType") != MODEL_SIGNING_PREDICATE:
        raise SignatureInvalid(
            f"predicate {statement.get('predicateType')!r} is not model-signing's"
        )
    predicate = statement.get("predicate")
    subjects = statement.get("subject")
    if not isinstance(predicate, dict) or not isinstance(subjects, list) or len(subjects) != 1:
        raise SignatureInvalid("a model-signing statement has one subject and a predicate")
    serialization = predicate.get("serialization") or {}
    resources = predicate.get("resources")
    if not isinstance(resources, list) or not isinstance(serialization, dict):
        raise SignatureInvalid("its predicate lists no resources")
    if serialization.get("method") != "files":
        raise SignatureInvalid(
            f"it digests {serialization.get('method')!r} (shards?), not whole files: "
            "sign with model_signing's default file serialization"
        )
    root = hashlib.sha256()
    digests: dict[str, str] = {}
    algorithms = set()
    for resource in resources:
        if not isinstance(resource, dict):
            raise SignatureInvalid("a resource is not an object")
        name, algorithm, digest = (
            resource.get("name"),
            resource.get("algorithm"),
            resource.get("digest"),
        )
        if not isinstance(name, str) or not isinstance(digest, str):
            raise SignatureInvalid("a resource has no name or digest")
        try:
            root.update(bytes.fromhex(digest))
        except ValueError:
            raise SignatureInvalid(f"digest of {name!r} is not hex") from None
        digests[name] = digest.lower()
        algorithms.add(str(algorithm))
    subject = subjects[0] if isinstance(subjects[0], dict) else {}
    subject_digest = (subject.get("digest") or {}).get("sha256")
    if subject_digest != root.hexdigest():
        raise SignatureInvalid("its subject digest does not match its resources")
    if list(digests) == ["."] and isinstance(subject.get("name"), str):
        # One file signed on its own: model-signing names it "." and puts its name on the
        # subject.
        digests = {subject["name"]: digests["."]}
    if len(algorithms) > 1:
        raise SignatureInvalid(f"it mixes digest algorithms {sorted(algorithms)}")
    return digests, algorithms.pop() if algorithms else "sha256"


def verify_artifact_signature(
    bundle: dict[str, Any], trusted: dict[str, Any]
) -> tuple[dict[str, str], str]:
    """Check a model-signing bundle's signature against trusted keys (key id -> public key):
    the files it covers (name -> digest) and the id of the key that signed it."""
    envelope = bundle.get("dsseEnvelope")
    if not isinstance(envelope, dict):
        raise SignatureInvalid("no dsseEnvelope")
    material = bundle.get("verificationMaterial") or {}
    hint = ((material.get("publicKey") or {}) if isinstance(material, dict) else {}).get("hint")
    signatures = [
        {**s, "keyid": s.get("keyid") or hint}
        for s in (envelope.get("signatures") or [])
        if isinstance(s, dict)
    ]
    statement, signer = verify_envelope({**envelope, "signatures": signatures}, trusted)
    digests, hash_type = _signed_digests(statement)
    if hash_type != "sha256":
        raise SignatureInvalid(
            f"it signs {hash_type} digests; the record keeps sha256 (sign with the default hashing)"
        )
    return digests, signer


def trusted_keys(keys: Sequence[TrustedKey]) -> dict[str, Any]:
    """key id -> public key, for the keys a target trusts (stored with its definition). A key
    stored by name only (a definition from before keys travelled with it) is refused."""
    found = {}
    for trusted in keys:
        if not trusted.pem:
            raise InvalidInput(
                f"key {trusted.label} is named by path only in the target's definition",
                step=Step(
                    "define_targets",
                    "apply the target's file again so the key is stored with it",
                    path=None,
                ),
            )
        key = public_key_from_pem(trusted.pem.encode(), trusted.label)
        found[key_id(key)] = key
    return found


# -- signed verify runs --------------------------------------------------------------------


def evidence_sha256(evidence: Any) -> str:
    return hashlib.sha256(canonical(evidence)).hexdigest()


def run_statement(
    *,
    record_id: str,
    model_id: str,
    target: str,
    run_id: str,
    host: str,
    file_digests: dict[str, str],
    checks: list[dict[str, Any]],
    fingerprint: dict[str, str],
    signed_at: str,
) -> dict[str, Any]:
    """The in-toto statement of one verify run: its subject is the record's files (by
    sha256); its predicate every check's outcome and evidence digest, the fingerprint (runtime,
    libraries, target definition, suite), the host and the time.

    ``checks``: {check, required, outcome, classification, summary, evidence} per check."""
    digests = [
        {
            "check": c["check"],
            "required": bool(c["required"]),
            "outcome": c["outcome"],
            "classification": c.get("classification"),
            "summary": c.get("summary", ""),
            "evidence_sha256": evidence_sha256(c.get("evidence", {})),
        }
        for c in checks
    ]
    return {
        "_type": IN_TOTO_STATEMENT_TYPE,
        "subject": [
            {"name": path, "digest": {"sha256": sha}} for path, sha in sorted(file_digests.items())
        ],
        "predicateType": RUN_PREDICATE,
        "predicate": {
            "record_id": record_id,
            "model_id": model_id,
            "target": target,
            "run_id": run_id,
            "host": host,
            "checks": digests,
            "evidence_sha256": hashlib.sha256(
                "".join(c["evidence_sha256"] for c in digests).encode()
            ).hexdigest(),
            "fingerprint": dict(sorted(fingerprint.items())),
            "target_sha256": hashlib.sha256(
                canonical({k: v for k, v in fingerprint.items() if k.startswith("target ")})
            ).hexdigest(),
            "signed_at": signed_at,
        },
    }


# How far a signed run's times may disagree with its signature's time, or lie ahead of this
# host's clock: generous for clock drift between hosts, far too small for a replay.
SKEW = timedelta(minutes=5)


def signed_time(statement: Any) -> datetime | None:
    """The time a run's statement says it was signed (UTC), or None when it names none that
    can be read. Covered by the signature: the order of signed runs is decided by it, never by
    the times an uploader claims for the checks."""
    predicate = statement.get("predicate") if isinstance(statement, dict) else None
    value = predicate.get("signed_at") if isinstance(predicate, dict) else None
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when.astimezone(UTC) if when.tzinfo is not None else None


def signed_time_problem(
    statement: Any, finished: Sequence[datetime], now: datetime | None = None
) -> str | None:
    """Why a signed run's times cannot be believed (None: they can): no readable signed time;
    signed in the future; a check that claims to have finished after the run was signed (more
    than ``SKEW`` either way). ``now`` None skips the future test (judging stored runs)."""
    signed = signed_time(statement)
    if signed is None:
        return "its statement names no signed time (signed_at with a UTC offset)"
    if now is not None and signed > now + SKEW:
        return f"it was signed in the future ({signed:%Y-%m-%d %H:%M:%S} UTC)"
    late = [f for f in finished if f.astimezone(UTC) > signed + SKEW]
    if late:
        return (
            f"its checks claim to have finished at {max(late).astimezone(UTC):%Y-%m-%d %H:%M:%S} "
            f"UTC, after it was signed ({signed:%Y-%m-%d %H:%M:%S} UTC)"
        )
    return None


def run_statement_problem(
    statement: Any,
    record_id: str,
    target: str,
    run: Any,
    file_digests: dict[str, str] | None,
) -> str | None:
    """Why a verified statement does not vouch for the stored ``run`` (a ``rules.StoredRun``)
    of this record on this target — None when it does. The stored outcomes and fingerprint
    must be exactly the signed ones: editing the database after signing is caught here."""
    if not isinstance(statement, dict) or statement.get("predicateType") != RUN_PREDICATE:
        return "the signed statement is not a verify run of modelreg"
    predicate = statement.get("predicate")
    if not isinstance(predicate, dict):
        return "the signed statement has no predicate"
    for key, expected in (("record_id", record_id), ("target", target), ("run_id", run.run_id)):
        if predicate.get(key) != expected:
            return f"it was signed for {key} {predicate.get(key)!r}, not {expected!r}"
    signed_checks = [
        (c.get("check"), c.get("required"), c.get("outcome"), c.get("classification"))
        for c in predicate.get("checks") or []
        if isinstance(c, dict)
    ]
    stored_checks = [(c.check, c.required, c.outcome, c.classification) for c in run.checks]
    if signed_checks != stored_checks:
        return "the stored check outcomes are not the signed ones"
    if predicate.get("fingerprint") != dict(sorted(run.fingerprint.items())):
        return "the stored fingerprint is not the signed one"
    stored_signed = getattr(run, "signed_at", None)
    if stored_signed is not None and stored_signed != signed_time(statement):
        return "the stored signed time is not the signed one"
    problem = signed_time_problem(statement, [c.finished_at for c in run.checks])
    if problem is not None:
        return problem
    if file_digests is not None:
        subject = {
            s.get("name"): (s.get("digest") or {}).get("sha256")
            for s in statement.get("subject") or []
            if isinstance(s, dict)
        }
        if subject != file_digests:
            return "it was signed over other files than this record's"
    return None


def run_envelope_statement(envelope: Any) -> dict[str, Any]:
    """The statement of a signed verify run, read *without* checking the signature (the rules
    check it whenever the run is judged), after checking its shape: a DSSE envelope of an
    in-toto statement naming a valid run id. Raises ``SignatureInvalid``."""
    if not isinstance(envelope, dict):
        raise SignatureInvalid("not a DSSE envelope of an in-toto statement")
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise SignatureInvalid("the envelope carries no signature")
    if not all(isinstance(x, dict) and isinstance(x.get("keyid"), str | None) for x in signatures):
        raise SignatureInvalid("the envelope's signatures are malformed")
    statement = _statement(envelope)
    predicate = statement.get("predicate")
    if statement.get("predicateType") != RUN_PREDICATE or not isinstance(predicate, dict):
        raise SignatureInvalid("the signed statement is not a verify run of modelreg")
    run_id = predicate.get("run_id")
    if not isinstance(run_id, str) or not re.fullmatch(r"[0-9a-f]{32}", run_id):
        raise SignatureInvalid("the signed statement names no valid run id")
    return statement


def run_details_problem(
    statement: dict[str, Any], host: str, checks: Sequence[tuple[str, Any]]
) -> str | None:
    """Why a run's details — its host, and each check's summary and evidence (``checks``:
    (summary, evidence) in order) — are not the signed ones (None: they are). The rules
    compare outcomes and fingerprint on every judgement; this binds what a run *shows*
    (the answers, the summaries) when it arrives from elsewhere."""
    predicate = statement.get("predicate")
    if not isinstance(predicate, dict):
        return "the signed statement has no predicate"
    if predicate.get("host") != host:
        return f"it was signed on host {str(predicate.get('host'))[:200]!r}, not {host!r}"
    signed = [
        (c.get("summary", ""), c.get("evidence_sha256"))
        for c in predicate.get("checks") or []
        if isinstance(c, dict)
    ]
    if signed != [(summary, evidence_sha256(evidence)) for summary, evidence in checks]:
        return "the summaries or evidence are not the signed ones"
    return None


def verify_run_envelope(
    envelope: dict[str, Any], trusted: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    """The statement of a signed run and its signer (no comparison with stored rows)."""
    statement, signer = verify_envelope(envelope, trusted)
    if not isinstance(statement, dict):
        raise SignatureInvalid("the signed payload is not a statement")
    return statement, signer
