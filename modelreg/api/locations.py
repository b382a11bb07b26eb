"""Where a record's bytes are: its locations, each with its newest recorded check (every
sha256 read there, by which host, when); adding and checking them, pushing to an OCI registry,
fetching with every sha256 checked."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelreg import config
from modelreg.api.core import Core
from modelreg.errors import (
    InvalidInput,
    NotFetchable,
)
from modelreg.schemas.output import (
    CheckedLocationOut,
    FetchedFileOut,
    FetchOutput,
    FetchProblem,
    LocationCheckOut,
    LocationOut,
    LocationsOutput,
    PushedFileOut,
    PushOutput,
)
from modelreg.steps import Step

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.record import Record


class Locations(Core):
    """Locations: list, add and check them; push; fetch."""

    def locations(self, ref: str) -> LocationsOutput:
        """Where a record's bytes are, each location with its newest recorded check."""
        return self._locations_output(self.get(ref), [], [])

    def _locations_output(
        self, record: Record, added: list[str], checked: list[CheckedLocationOut]
    ) -> LocationsOutput:
        from modelreg.judging import fetchability
        from modelreg.locations import parse_location

        with self.store.read() as reads:
            states = reads.location_states([record.id])[record.id]
        shown = []
        for loc in states:
            check = None
            if loc.ok is not None:
                assert loc.host is not None and loc.source is not None and loc.at is not None
                check = LocationCheckOut(
                    ok=loc.ok, detail=loc.detail, host=loc.host, source=loc.source, at=loc.at
                )
            shown.append(
                LocationOut(
                    url=loc.url,
                    scheme=parse_location(loc.url).scheme,
                    fetchable=bool(loc.ok),
                    added_at=loc.added_at,
                    added_by=loc.added_by,
                    checked=check,
                )
            )
        fetch_from, unfetchable = fetchability(states)
        return LocationsOutput(
            record_id=record.id,
            model_id=record.model_id,
            added_from=str(record.root),
            locations=shown,
            added=added,
            checked=checked,
            fetch_from=fetch_from,
            unfetchable=unfetchable,
        )

    def locate(
        self,
        ref: str,
        add: Sequence[str] = (),
        *,
        check: Sequence[str] | bool = False,
        check_added: bool = True,
        actor: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> LocationsOutput:
        """Add locations to a record (validated: malformed URLs and URLs carrying
        credentials are refused) and list them all. Adding a known one changes nothing.

        ``check``: read every file at these locations (True: at every location of the
        record) and compare each sha256 — what makes a location fetchable for every reader.
        A location this host cannot read (another host's path, a client library not
        installed, the network) is said so and nothing is recorded for it. Locations added
        here are checked too (``check_added``) when this host can read them."""
        from modelreg.locations import parse_location

        urls = [parse_location(url).url for url in add]
        wanted = [parse_location(url).url for url in check] if not isinstance(check, bool) else []
        record = self.get(ref)
        actor = actor or config.actor()
        added: list[str] = []
        if urls:
            with self.store.locked(record.model_id) as tx:
                added = tx.add_locations(record, urls, actor)
        with self.store.read() as reads:
            known = [loc.url for loc in reads.locations([record.id])[record.id]]
        if check is True:
            wanted = known
        else:
            unknown = [u for u in wanted if u not in known]
            if unknown:
                raise InvalidInput(
                    f"{unknown[0]} is not a location of {record.id}",
                    step=Step("locate", "add it first", ref=record.id, add=[unknown[0]]),
                )
        targets = list(dict.fromkeys([*(added if check_added else []), *wanted]))
        checked = self._check_locations(record, targets, "check", actor, progress)
        return self._locations_output(record, added, checked)

    def _check_locations(
        self,
        record: Record,
        urls: Sequence[str],
        source: str,
        actor: str,
        progress: Callable[[int], None] | None = None,
    ) -> list[CheckedLocationOut]:
        """Read every file at each of ``urls`` (outside any lock: the reads may be slow) and
        record what was found where it says something about the bytes."""
        from modelreg import host
        from modelreg.locations import WantedFile, check_location

        if not urls:
            return []
        with self.store.read() as reads:
            files = reads.files([record.id])[record.id]
        wanted = [WantedFile(f.path, f.bytes, f.sha256) for f in files]
        scratch = config.home() / "cache" / "checks"
        found = [check_location(wanted, url, scratch, progress) for url in urls]
        recorded = [c for c in found if c.ok is not None]
        if recorded:
            with self.store.locked(record.model_id) as tx:
                for c in recorded:
                    tx.record_location_check(
                        record.id, c.url, bool(c.ok), c.detail, host.hostname(), source, actor
                    )
        return [
            CheckedLocationOut(url=c.url, ok=c.ok, detail=c.detail, recorded=c.ok is not None)
            for c in found
        ]

    def push(
        self,
        ref: str,
        url: str,
        *,
        progress: Callable[[int], None] | None = None,
        actor: str | None = None,
    ) -> PushOutput:
        """Push a record's files to an OCI registry as one artifact (``modelreg.oci``: each
        layer's digest is the file's sha256, which the registry checks as it arrives) under
        ``url``'s tag, and record the manifest's digest as a location. The bytes come from a
        copy on this host (file:// or the Hugging Face cache)."""
        from modelreg import oci
        from modelreg.locations import local_copy
        from modelreg.s3 import Unavailable

        reference = oci.parse_reference(url)
        if reference is None or reference.digest is not None:
            raise InvalidInput(
                f"push to {url[:120]!r}: not an OCI repository and tag",
                "give oci://registry/repository:tag (the digest is what the registry answers)",
            )
        with self.store.read() as reads:
            record = reads.record(ref)
            files = reads.files([record.id])[record.id]
            urls = [loc.url for loc in reads.locations([record.id])[record.id]]
        local = local_copy([(f.path, f.bytes) for f in files], urls)
        if local is None:
            raise NotFetchable(
                f"{record.id}: no copy of its files on this host to push",
                "fetch it first and locate that copy",
                step=Step("fetch", ref=record.id, to=None),
            )
        # Deterministic: the same record pushed again is the same manifest, so the same digest
        # (the record's creation time, not the push's: a push a second later must not make a
        # new artifact of the same bytes).
        annotations = {
            "org.opencontainers.image.created": record.created_at.isoformat(timespec="seconds"),
            "dev.modelreg.record": record.id,
            "dev.modelreg.model": record.model_id,
        }
        try:
            digest, pushed = oci.push(
                reference,
                [(f.path, f.bytes, f.sha256, local[f.path]) for f in files],
                annotations,
                progress,
            )
        except Unavailable as exc:
            raise NotFetchable(f"push {record.id} to {reference.url()}: {exc.reason}") from None
        location = reference.url(digest)
        from modelreg import host

        with self.store.locked(record.model_id) as tx:
            tx.add_locations(record, [location], actor or config.actor())
            # The registry checked every blob's digest as it arrived: the copy is verified.
            tx.record_location_check(
                record.id,
                location,
                True,
                "every sha256, checked by the registry as it was pushed",
                host.hostname(),
                "push",
                actor or config.actor(),
            )
        return PushOutput(
            record_id=record.id,
            location=location,
            manifest_digest=digest,
            files=[
                PushedFileOut(path=p.path, bytes=p.bytes, sha256=p.sha256, uploaded=p.uploaded)
                for p in pushed
            ],
        )

    def fetch(
        self,
        ref: str,
        to: Path,
        *,
        progress: Callable[[int], None] | None = None,
        on_start: Callable[[str, int, int], None] | None = None,
    ) -> FetchOutput:
        """Copy a record's files into the new directory ``to`` from its locations (file
        locations on this host, the local Hugging Face cache, S3 through the standard AWS
        credential chain), checking every sha256 as the bytes arrive: a mismatch is refused
        and nothing is left at ``to`` unless every file matched. An S3 download cut short
        keeps its bytes beside ``to`` and the same fetch again resumes from them.

        ``on_start(record_id, files, bytes)`` is called once before any byte is fetched and
        ``progress(n)`` with each count of bytes written (from several threads, one call at a
        time per file): for a progress display."""
        import time

        from modelreg import runmetrics
        from modelreg.locations import WantedFile, fetch_files

        with self.store.read() as reads:
            record = reads.record(ref)
            files = reads.files([record.id])[record.id]
            states = reads.location_states([record.id])[record.id]
        # Verified copies first, then those never checked, then those found wanting.
        urls = [s.url for s in sorted(states, key=lambda s: {True: 0, None: 1, False: 2}[s.ok])]
        if on_start is not None:
            on_start(record.id, len(files), sum(f.bytes for f in files))
        started = time.perf_counter()
        outcome = "error"
        try:
            fetched, skipped = fetch_files(
                [WantedFile(f.path, f.bytes, f.sha256) for f in files], urls, to, progress
            )
            outcome = "fetched"
        except NotFetchable as exc:
            outcome = "not_fetchable"
            self._fetch_checked(record, [], exc.problems)
            raise
        finally:
            runmetrics.observe(
                "modelreg_fetch_duration_seconds", time.perf_counter() - started, outcome=outcome
            )
        self._fetch_checked(record, fetched, skipped)
        return FetchOutput(
            record_id=record.id,
            to=str(to.expanduser().absolute()),
            files=[
                FetchedFileOut(path=f.path, bytes=f.bytes, sha256=f.sha256, source=f.source)
                for f in fetched
            ],
            skipped=[FetchProblem(url=s.url, reason=s.reason) for s in skipped],
        )

    def _fetch_checked(
        self, record: Record, fetched: Sequence[Any], skipped: Sequence[Any]
    ) -> None:
        """Record what a fetch read where: a location that gave every file (every sha256
        matched) is verified; one that gave other bytes is recorded as holding them."""
        from modelreg import host
        from modelreg.locations import says_gone

        whole = {f.source for f in fetched if all(g.source == f.source for g in fetched)}
        other = {p.url for p in skipped if says_gone(p.reason)} - whole
        if not (whole or other):
            return
        actor, here = config.actor(), host.hostname()
        with self.store.locked(record.model_id) as tx:
            for url in sorted(whole):
                tx.record_location_check(
                    record.id, url, True, "every sha256, fetched", here, "fetch", actor
                )
            for url in sorted(other):
                why = next(p.reason for p in skipped if p.url == url)
                tx.record_location_check(record.id, url, False, why, here, "fetch", actor)
