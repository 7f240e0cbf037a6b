"""The extender's request timeout stops the evaluation too (rulesched.extender.service): a filter
request over a rule far too costly for the checker (its limits lifted to compile it) is answered
503 at its timeout, and its evaluation is given up at the next check, so the worker answers the
requests behind it at once instead of after the costly one's whole evaluation (~20 s of CPU
here). What proves it is the CPU time the process spent on both requests, which a loaded machine
does not inflate, and the next request's answer within the same timeout; the timeout leaves a
slow machine the time to reach the next check (an evaluation of one node, ~0.1 s of CPU)."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
from typing import Any

from rulesched.extender.server import ExtenderServer, ExtenderSettings
from rulesched.extender.service import Extender
from rulesched.lang import RulesHandle
from tests.extender_client import extender_args
from tests.helpers.deadline import HEAVY, lifted
from tests.helpers.kube import extender_node as node
from tests.helpers.kube import extender_pod as pod

TIMEOUT = 2.0


def labelled(i: int) -> dict[str, Any]:
    found = node(f"n{i}")
    found["metadata"]["labels"].update({f"l{j}": str(i) for j in range(16)})
    return found


def post(port: int, body: dict[str, Any]) -> tuple[int, dict[str, Any], float]:
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("POST", "/filter", json.dumps(body), {"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read())
    return response.status, answer, time.monotonic() - started


def test_a_costly_request_holds_the_worker_no_longer_than_its_timeout() -> None:
    extender = Extender(RulesHandle(lifted(HEAVY)))
    server = ExtenderServer(ExtenderSettings(listen="127.0.0.1:0", request_timeout=TIMEOUT), extender)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        address = asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=10)
        port = int(address.rsplit(":", 1)[1])
        nodes = [labelled(i) for i in range(200)]  # the costly rule: ~0.1 s of CPU per node
        cpu = time.process_time()
        slow_status, slow_answer, _ = post(port, extender_args(pod("slow", cost="high"), nodes=nodes))
        # The next request, sent at once: answered, not queued behind the rest of the costly one
        # (which would take it past its own timeout too).
        status, answer, took = post(port, extender_args(pod("cheap"), nodes=nodes[:4]))
        cpu = time.process_time() - cpu
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
    print(f"the request after a costly one given up answered in {took:.2f}s (timeout {TIMEOUT}s); {cpu:.2f}s of CPU")
    assert slow_status == 503 and f"within {TIMEOUT:g}s" in slow_answer["Error"]
    assert status == 200 and len(answer["Nodes"]["items"]) == 4, answer
    # at most the timeout's worth of the costly evaluation (and the cheap one), not all 20 s of it
    assert cpu < TIMEOUT + 3.0, cpu
