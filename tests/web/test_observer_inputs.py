"""The observer answers a question an agent waits on (``ask_user``): the route behind the token, and the page's field."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio

import condukt
import condukt.web.observer as observer
from condukt.events import InputRequested
from condukt.testing import ScriptedModel, call, reply
from condukt.tools import AskUser

from .helpers import AUTH, TOKEN, hypercorn_trio
from .test_observer_browser import browser  # noqa: F401  (the fixture browser_page uses)


async def test_the_answer_route_answers_a_waiting_question_behind_the_token() -> None:
    model = ScriptedModel([call("ask_user", {"question": "Ship it?"}, id="q1"), reply("Shipping.")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[AskUser], load_project_instructions=False)
        worker = await node.spawn(condukt.Server)
        app = observer.create_app(node, token=TOKEN)
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
            answers: list[Any] = []
            async with trio.open_nursery() as nursery, node.subscribe(agent.session_id) as events:

                async def ask() -> None:
                    answers.append(await agent.run("release"))

                nursery.start_soon(ask)
                async for published in events:
                    if isinstance(published.event, InputRequested):
                        break
                path = f"/api/processes/{agent.id}/inputs/q1"
                assert (await client.post(path, json={"value": "yes"})).status_code == 401
                assert (await client.post(path, json={"answer": "yes"}, headers=AUTH)).status_code == 422
                unknown = await client.post(f"/api/processes/{agent.id}/inputs/q7", json={"value": "x"}, headers=AUTH)
                assert (unknown.status_code, unknown.json()["error"]) == (404, "UnknownInputRequest")
                not_agent = await client.post(f"/api/processes/{worker.id}/inputs/q1", json={"value": "x"}, headers=AUTH)
                assert (not_agent.status_code, not_agent.json()["error"]) == (404, "AgentNotFound")
                done = await client.post(path, json={"value": "yes"}, headers=AUTH)
                assert done.json() == {"pid": agent.id, "call_id": "q1", "answered": True}
            assert answers == ["Shipping."]
            again = await client.post(path, json={"value": "no"}, headers=AUTH)
            assert (again.status_code, again.json()["error"]) == (409, "InputAlreadyAnswered")
            page = (await client.get("/")).text
            assert "input_requested" in page and 'class="answer"' in page  # the field and its button


async def test_the_page_answers_a_waiting_question_with_its_field_and_button(browser_page: Any) -> None:
    from .test_observer_browser import By, click, rows, wait_until

    driver = browser_page
    model = ScriptedModel([call("ask_user", {"question": "Which branch?"}, id="q1"), reply("Merged into main.")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[AskUser], load_project_instructions=False)
        async with hypercorn_trio(observer.create_app(node, token=TOKEN, interval=0.1)) as url:
            key = str(agent.id)

            def select_agent() -> None:
                # The observer logs events from its first look at the node on: open it before the run.
                driver.get(observer.page_url(url, TOKEN, path="/"))
                wait_until(driver, lambda d: any(r["key"] == key for r in rows(d)), "the agent")
                click(driver, f'#tree tr[data-key="{key}"] td:first-child')
                wait_until(driver, lambda d: "No events yet." in d.find_element(By.ID, "log").text, "its empty log")

            await trio.to_thread.run_sync(select_agent)
            answers: list[Any] = []
            async with trio.open_nursery() as nursery:

                async def ask() -> None:
                    answers.append(await agent.run("merge it"))

                nursery.start_soon(ask)

                def answer_in_page() -> None:
                    wait_until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#log input.answer"), "the answer field")
                    assert "Which branch?" in driver.find_element(By.ID, "log").text
                    driver.find_element(By.CSS_SELECTOR, "#log input.answer").send_keys("main")
                    click(driver, "#log button.answer")
                    wait_until(driver, lambda d: "Answer sent" in d.find_element(By.ID, "flash").text, "the confirmation")

                await trio.to_thread.run_sync(answer_in_page)
            assert answers == ["Merged into main."]
    assert model.requests[1].messages[-1].text == "main"


@pytest.fixture
def browser_page(request: pytest.FixtureRequest) -> Any:
    """The observer browser tests' headless Chromium (skipped without chromium, chromedriver or selenium)."""
    from . import test_observer_browser as browser_tests

    if browser_tests.webdriver is None:
        pytest.skip("selenium is not installed (pip install '.[test]')")
    if browser_tests.CHROMIUM is None or browser_tests.CHROMEDRIVER is None:
        pytest.skip("needs chromium and chromedriver (Debian: apt-get install chromium chromium-driver)")
    return request.getfixturevalue("browser")
