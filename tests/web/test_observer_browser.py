"""The observer page in a real headless Chromium (selenium + chromedriver), against hypercorn on 127.0.0.1.

Needs the Debian/Ubuntu packages ``chromium`` and ``chromium-driver`` (``.ci/run``
installs them when it runs as root); skipped without them. Set
``CONDUKT_OBSERVER_SCREENSHOT=docs/observer.png`` to save the screenshot of the
page the test takes (that is how ``docs/observer.png`` is made).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from waiting import TIMEOUT

import condukt
import condukt.web.observer as observer
from condukt.messages import Usage
from condukt.testing import ScriptedModel, call, reply

from .helpers import TOKEN, hypercorn_trio
from .observed import Blocked, CrashOnTool, Crashy, Gate

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

try:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # pragma: no cover - the test extra has it
    webdriver = None  # type: ignore[assignment]

pytestmark = [
    pytest.mark.skipif(webdriver is None, reason="selenium is not installed (pip install '.[test]')"),
    pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                       reason="needs chromium and chromedriver (Debian: apt-get install chromium chromium-driver)"),
]


@pytest.fixture
def browser() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM  # type: ignore[assignment]
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1400,820", "--force-device-scale-factor=1", "--no-first-run"):
        options.add_argument(argument)
    # The driver from the distribution, never one downloaded by selenium-manager.
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def wait_until(driver: Any, condition: Callable[[Any], Any], what: str, seconds: float = TIMEOUT) -> Any:
    """Selenium's wait for ``condition``: the page lives in another process, the driver can only ask it.

    ``condition`` must return a false value while the page is not there yet
    (an exception other than a missing or stale element fails at once).
    """
    try:
        return WebDriverWait(driver, seconds, poll_frequency=0.05,
                             ignored_exceptions=(StaleElementReferenceException,)).until(condition)
    except TimeoutException:
        raise AssertionError(f"the page never showed {what}; it shows:\n{driver.find_element(By.TAG_NAME, 'body').text}") from None


def rows(driver: Any) -> list[dict[str, str]]:
    """The tree's rows as the page renders them (read in one go: the page re-renders on every update)."""
    script = """return Array.from(document.querySelectorAll('#tree tr.proc')).map(function (tr) {
        return {key: tr.dataset.key, kind: tr.dataset.kind, status: tr.dataset.status, restarts: tr.dataset.restarts,
                session: tr.dataset.session || '', text: tr.innerText, abort: !!tr.querySelector('button.abort')}; });"""
    result: list[dict[str, str]] = driver.execute_script(script)
    return result


def click(driver: Any, selector: str) -> None:
    """A real mouse click on the element ``selector`` names, found again if an update replaced it meanwhile."""
    def clicked(d: Any) -> bool:
        d.find_element(By.CSS_SELECTOR, selector).click()
        return True
    wait_until(driver, clicked, f"a clickable {selector}")


async def test_the_page_shows_the_live_tree_a_restart_and_aborts_a_run(browser: Any) -> None:
    gate = Gate()
    model = ScriptedModel([
        [reply("Let me look at the diff.", usage=Usage(1840, 96)), call("gate", {"ref": "HEAD~1"}, id="g1")],
        reply("unused"),
    ])
    hold = trio.Event()
    async with condukt.open_node() as node:
        sup = await node.start_supervisor(
            [condukt.ChildSpec("reviewer", condukt.Agent, kwargs={"model": model, "tools": [gate], "id": "reviewer-1"}),
             condukt.ChildSpec("crashy", Crashy), condukt.ChildSpec("indexer", Blocked)],
            name="app", max_restarts=10,
        )
        sessions = await node.start_dynamic_supervisor(name="sessions")
        for n in range(3):
            await sessions.start_child(condukt.ChildSpec(None, condukt.Agent, kwargs={
                "model": ScriptedModel([reply("ok")]), "id": f"chat-{n}"}))
        children = dict(sup.which_children())
        reviewer, crashy, indexer = children["reviewer"], children["crashy"], children["indexer"]
        assert reviewer is not None and crashy is not None and indexer is not None
        await indexer.cast(hold)
        for n in range(4):
            await indexer.cast(n)
        app = observer.create_app(node, token=TOKEN, interval=0.1)
        async with hypercorn_trio(app) as url:
            page = observer.page_url(url, TOKEN, path="/")

            def open_page() -> list[dict[str, str]]:
                browser.get(page)
                wait_until(browser, lambda d: len(rows(d)) >= 9, "the tree")
                return rows(browser)

            shown = await trio.to_thread.run_sync(open_page)
            assert "token" not in browser.current_url  # taken out of the address bar at once
            snap = observer.snapshot(node)
            assert [r["key"] for r in shown] == [p.key for p in snap.processes]  # every process, in tree order
            kinds = {r["key"]: r["kind"] for r in shown}
            assert kinds[str(sup.id)] == "supervisor" and kinds[str(sessions.id)] == "dynamic_supervisor"
            assert kinds[str(reviewer.id)] == "agent" and kinds[str(crashy.id)] == "server"
            assert sum(1 for r in shown if r["kind"] == "agent") == 4
            indexer_row = next(r for r in shown if r["key"] == str(indexer.id))
            assert "Blocked" in indexer_row["text"] and "\t4\t" in indexer_row["text"]  # its mailbox depth

            # A child crashes: the page shows the new incarnation with one restart.
            await crashy.cast("boom")

            def restarted() -> dict[str, str]:
                return wait_until(browser, lambda d: next(
                    (r for r in rows(d) if "crashy" in r["text"] and r["restarts"] == "1"), None), "a restart")

            after = await trio.to_thread.run_sync(restarted)
            new_crashy = dict(sup.which_children())["crashy"]
            assert new_crashy is not None and after["key"] == str(new_crashy.id) != str(crashy.id)
            assert "Crashy" in after["text"]

            # A run in progress: turn, tokens and the tool in flight, its event log, and the abort button.
            outcome: list[BaseException] = []

            async def run() -> None:
                try:
                    await reviewer.run("Review the last commit")  # type: ignore[attr-defined]
                except condukt.Aborted as exc:
                    outcome.append(exc)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                await gate.entered.wait()

                def watch_run() -> None:
                    key = str(reviewer.id)
                    wait_until(browser, lambda d: next(
                        (r for r in rows(d) if r["key"] == key and r["abort"] and "gate" in r["text"]), None),
                        "the running agent with its tool call and an abort button")
                    text = next(r for r in rows(browser) if r["key"] == key)["text"]
                    assert "turn 1" in text and "1936 tok" in text
                    click(browser, f'#tree tr[data-key="{key}"] td:first-child')
                    wait_until(browser, lambda d: "tool_call_start" in d.find_element(By.ID, "log").text,
                               "the agent's event log")
                    log = browser.find_element(By.ID, "log").text
                    assert "agent_start" in log and "Let me look at the diff." in log and "HEAD~1" in log
                    details = browser.find_element(By.ID, "details").text
                    assert "reviewer-1" in details and "1840 in · 96 out" in details
                    assert "Review the last commit" in details
                    target = os.environ.get("CONDUKT_OBSERVER_SCREENSHOT")
                    if target:
                        Path(target).parent.mkdir(parents=True, exist_ok=True)
                        assert browser.save_screenshot(target)
                    click(browser, f'#tree tr[data-key="{key}"] button.abort')
                    wait_until(browser, lambda d: "Run aborted" in d.find_element(By.ID, "flash").text,
                               "the abort's confirmation")
                    wait_until(browser, lambda d: "aborted" in d.find_element(By.ID, "log").text,
                               "the aborted run's done event")

                await trio.to_thread.run_sync(watch_run)
            assert len(outcome) == 1 and not reviewer.running  # type: ignore[attr-defined]
            hold.set()


async def test_without_a_token_in_its_address_the_page_asks_for_it_and_keeps_it_for_the_tab(browser: Any) -> None:
    async with condukt.open_node() as node:
        await node.start_supervisor([condukt.ChildSpec("w", Blocked)], name="app")
        async with hypercorn_trio(observer.create_app(node, token=TOKEN, interval=0.1)) as url:

            def log_in() -> None:
                browser.get(observer.page_url(url, path="/"))
                # alert_is_present() answers False until the prompt is up: ``d.switch_to.alert`` raises
                # NoAlertPresentException then, which fails the wait at once (the flake under load: the
                # prompt comes after the page's first request is refused, later than the page load).
                alert = wait_until(browser, expected_conditions.alert_is_present(), "a prompt for the token")
                alert.send_keys(TOKEN)
                alert.accept()
                wait_until(browser, lambda d: any(r["kind"] == "supervisor" for r in rows(d)), "the tree")
                browser.refresh()  # the tab remembers the token: no prompt this time
                wait_until(browser, lambda d: any(r["kind"] == "supervisor" for r in rows(d)), "the tree again")
                assert TOKEN not in browser.current_url

            await trio.to_thread.run_sync(log_in)


async def test_a_crash_shows_its_reason_and_the_crashed_incarnations_log_ending_in_its_error(browser: Any) -> None:
    @condukt.tool
    async def lookup(ref: str) -> str:
        """Looks a commit up."""
        return ref

    model = ScriptedModel([[reply("Checking the commit first."), call("lookup", {"ref": "HEAD~1"}, id="c1")],
                           reply("never")])
    async with condukt.open_node() as node:
        sup = await node.start_supervisor(
            [condukt.ChildSpec("reviewer", CrashOnTool, kwargs={"model": model, "tools": [lookup]}),
             condukt.ChildSpec("indexer", Blocked)],
            name="app", max_restarts=5, max_seconds=60.0,
        )
        worker = dict(sup.which_children())["reviewer"]
        assert worker is not None
        session = worker.session_id  # type: ignore[attr-defined]
        async with hypercorn_trio(observer.create_app(node, token=TOKEN, interval=0.1)) as url:
            page = observer.page_url(url, TOKEN, path="/")

            def open_page() -> None:
                browser.get(page)
                wait_until(browser, lambda d: any(r["key"] == str(worker.id) for r in rows(d)), "the agent")

            await trio.to_thread.run_sync(open_page)
            with pytest.raises(condukt.CallError):
                await worker.run("Review the last commit")  # type: ignore[attr-defined]

            def inspect_crash() -> None:
                row = wait_until(browser, lambda d: next(
                    (r for r in rows(d) if "reviewer" in r["text"] and r["restarts"] == "1"), None), "the restart")
                click(browser, f'#tree tr[data-key="{row["key"]}"] td:first-child')
                wait_until(browser, lambda d: "RuntimeError: crash on purpose" in d.find_element(By.ID, "details").text,
                           "the crash's reason in the process panel")
                details = browser.find_element(By.ID, "details").text
                assert f"#{worker.id}" in details and "restarted" in details and "Traceback" in details
                assert "one_for_one" not in details  # a worker's panel: no supervisor policy
                click(browser, "#details button.showlog")
                wait_until(browser, lambda d: [e.get_attribute("data-type") for e in
                                               d.find_elements(By.CSS_SELECTOR, "#log .ev")][-2:] == ["error", "done"],
                           "the crashed incarnation's log ending in its error")
                log = browser.find_element(By.ID, "log").text
                assert "Checking the commit first." in log and "lookup" in log
                assert "RuntimeError: crash on purpose (the agent process crashed)" in log
                assert log.rstrip().endswith("failed")
                assert session in browser.find_element(By.ID, "logtitle").text
                target = os.environ.get("CONDUKT_OBSERVER_CRASH_SCREENSHOT")
                if target:
                    browser.set_window_size(1400, 1000)
                    browser.execute_script("document.querySelector('#details .crash').scrollIntoView();")
                    Path(target).parent.mkdir(parents=True, exist_ok=True)
                    assert browser.save_screenshot(target)
                # The supervisor's panel: strategy, intensity and the restart timeline.
                click(browser, f'#tree tr[data-key="{sup.id}"] td:first-child')
                wait_until(browser, lambda d: "restart timeline" in d.find_element(By.ID, "details").text.lower(),
                           "the supervisor's restart timeline")
                details = browser.find_element(By.ID, "details").text
                assert "one_for_one" in details and "5 restarts in 60 s" in details
                assert "reviewer · RuntimeError: crash on purpose → restarted" in details

            await trio.to_thread.run_sync(inspect_crash)


@pytest.mark.slow
async def test_search_finds_one_process_among_ten_thousand_within_200_ms(browser: Any, wall_bound: Any) -> None:
    async with condukt.open_node() as node:
        pool = await node.start_dynamic_supervisor(name="pool")
        for n in range(10_000 - 1):  # with the pool
            await pool.start_child(condukt.ChildSpec(None, condukt.Server, name=f"worker-{n}"))
        assert node.process_count >= 10_000
        async with hypercorn_trio(observer.create_app(node, token=TOKEN, interval=1.0)) as url:
            page = observer.page_url(url, TOKEN, path="/")

            def search() -> float:
                browser.get(page)
                wait_until(browser, lambda d: d.find_element(By.ID, "shown").text.startswith("100"), "10,000 rows")
                script = """var done = arguments[arguments.length - 1], box = document.getElementById('search');
                    var t0 = performance.now();
                    box.value = 'worker-7777'; box.dispatchEvent(new Event('input'));
                    requestAnimationFrame(function () { setTimeout(function () {
                      var rows = document.querySelectorAll('#tree tr.proc');
                      done([performance.now() - t0, Array.from(rows).map(function (r) { return r.innerText; })]);
                    }, 0); });"""
                with wall_bound(0.2, "a search among 10,000 processes, to the painted row"):
                    elapsed, found = browser.execute_async_script(script)
                assert len(found) == 1 and "worker-7777" in found[0]
                return float(elapsed)

            elapsed = await trio.to_thread.run_sync(search)
            print(f"search among 10,000 processes: {elapsed:.1f} ms in the page")
