"""/metrics has bounded labels (issue 44, item 3): h11 accepts any token as a method and any
path, so a label per method or path let anyone grow the exposition (84 MB from 1,300
requests). A thousand requests with random methods and paths to a real server on loopback
leave the exposition with the same series and the same size, give or take the digits of the
counts."""

from __future__ import annotations

import http.client
import random
import string

from prometheus_client.parser import text_string_to_metric_families

from tests.server.conftest import serving


def _series(text: str) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {
        (s.name, tuple(sorted(s.labels.items())))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _random_requests(port: int, n: int, rng: random.Random) -> dict[int, int]:
    """``n`` requests of random token methods and random paths; statuses seen -> count."""
    statuses: dict[int, int] = {}
    token = string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~"
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for i in range(n):
        method = "".join(rng.choices(token, k=rng.randint(1, 24)))
        path = "/" + "/".join(
            "".join(rng.choices(string.ascii_lowercase + string.digits, k=rng.randint(1, 12)))
            for _ in range(rng.randint(0, 4))
        )
        if i % 3 == 0:
            path = f"/api/v1/records/r_{rng.getrandbits(48):012x}"  # a real route, any id
        connection.putrequest(method, path, skip_accept_encoding=True)
        connection.putheader("Content-Length", "0")
        connection.endheaders()
        answer = connection.getresponse()
        answer.read()
        statuses[answer.status] = statuses.get(answer.status, 0) + 1
        if answer.will_close:
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.close()
    return statuses


def test_a_thousand_random_methods_and_paths_leave_the_exposition_as_it_was(
    db_url: str,
) -> None:
    rng = random.Random(44)
    with serving(db_url, public_metrics=True) as served:
        port = int(served.url.rsplit(":", 1)[1])
        scrape = served.client()
        _random_requests(port, 20, rng)  # every series a random request can make, made once
        scrape.get("/metrics")  # and the scrape's own
        before = scrape.get("/metrics").text
        statuses = _random_requests(port, 1000, rng)
        after = scrape.get("/metrics").text
    assert sum(statuses.values()) == 1000 and all(400 <= s < 500 for s in statuses)
    assert _series(after) == _series(before)
    assert abs(len(after) - len(before)) < 200  # counts grew by a digit or two, nothing more
    methods = {dict(labels).get("method") for _, labels in _series(after)} - {None}
    assert methods <= {"GET", "other"}
    routes = {dict(labels).get("route") for _, labels in _series(after)} - {None}
    assert routes <= {"unmatched", "/", "/api/v1/records/{record_id}", "/metrics"}
