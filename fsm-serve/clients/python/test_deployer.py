"""Tests of deployer.py against a scripted stand-in for `fsm serve`: what the
controller does when the service answers 503 (its store unavailable), which a
real service gives only while etcd is down, when a proxy in front of it answers
with a page of its own, when the work of an action fails, and how it lists
page by page.

    python3 -m unittest discover -s fsm-serve/clients/python
"""

import http.server
import json
import threading
import unittest

from deployer import Deployer, Service


class Scripted(http.server.BaseHTTPRequestHandler):
    """Answers each request with the next (status, body) scripted for its
    method and path, and records the request."""

    def do_GET(self):
        self.do_POST()

    def do_POST(self):
        self.server.seen.append(self.path)
        answers = self.server.script[self.path]
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        status, body, headers = answer if len(answer) == 3 else (*answer, {})
        # Bytes are sent as they are, as a proxy's page: anything else as JSON.
        raw = isinstance(body, bytes)
        data = body if raw else json.dumps(body).encode()
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Type", "text/html" if raw else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


UNAVAILABLE = (503, {"error": "unavailable", "message": "the store is unavailable"})
START = "/v1/vm/objects/vm-1/actions/deploy"
COMPLETE = "/v1/vm/objects/vm-1/in-flight/7/complete"
FAIL = "/v1/vm/objects/vm-1/in-flight/7/fail"
PROXY_DOWN = (502, b"<html><body><h1>502 Bad Gateway</h1></body></html>")


def run_deploy(script, retries=3, work=lambda _: None):
    """Deploys vm-1 against a service scripted by `script`: the outcome (or
    what was raised), the paths asked, in order, and the lines logged."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    server.script, server.seen = script, []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        lines = []
        service = Service(
            f"http://127.0.0.1:{server.server_port}", "vm", "token",
            retries=retries, backoff=0.01, log=lines.append,
        )
        deployer = Deployer(service, "VIRTUAL", "deploy", work, lines.append)
        try:
            outcome = deployer.deploy("vm-1")
        except RuntimeError as raised:
            outcome = raised
        return outcome, server.seen, lines
    finally:
        server.shutdown()
        server.server_close()


class RetriesOn503(unittest.TestCase):
    def test_a_start_and_a_completion_are_made_again_until_the_store_takes_them(self):
        outcome, seen, lines = run_deploy({
            START: [UNAVAILABLE, UNAVAILABLE, (201, {"fence": 7})],
            COMPLETE: [UNAVAILABLE, (200, {"state": "RUNNING"})],
        })
        self.assertIs(outcome, True, lines)
        self.assertEqual(seen, [START] * 3 + [COMPLETE] * 2)
        self.assertEqual(sum("503 the store is unavailable; again in" in l for l in lines), 3, lines)

    def test_a_retry_waits_at_least_what_retry_after_says(self):
        # `fsm serve` says `Retry-After: 1` on every 503: the backoff (10 ms
        # here) gives way to it; a date or nonsense is not waited for.
        unavailable = (*UNAVAILABLE, {"Retry-After": "1"})
        outcome, seen, lines = run_deploy({
            START: [unavailable, (*UNAVAILABLE, {"Retry-After": "soon"}), (201, {"fence": 7})],
            COMPLETE: [(200, {"state": "RUNNING"})],
        })
        self.assertIs(outcome, True, lines)
        waits = [l.rsplit("again in ", 1)[1] for l in lines if "again in" in l]
        self.assertEqual(waits, ["1.0 s", "0.0 s"], lines)

    def test_a_start_the_store_never_takes_raises_after_the_last_try(self):
        outcome, seen, lines = run_deploy({START: [UNAVAILABLE]}, retries=2)
        self.assertIsInstance(outcome, RuntimeError)
        self.assertIn("start answered 503", str(outcome))
        self.assertEqual(seen, [START] * 3)

    def test_a_refusal_is_not_made_again(self):
        busy = (409, {"error": "busy", "message": "vm-1 is held by deploy"})
        outcome, seen, lines = run_deploy({START: [busy, (201, {"fence": 7})]})
        self.assertIs(outcome, False)
        self.assertEqual(seen, [START])

    def test_a_proxy_page_is_made_again_and_then_read_as_a_refusal(self):
        # A proxy's 502 is made again like a 503; its page, not JSON, becomes
        # the message.
        outcome, seen, lines = run_deploy({
            START: [PROXY_DOWN, (201, {"fence": 7})],
            COMPLETE: [(200, {"state": "RUNNING"})],
        })
        self.assertIs(outcome, True, lines)
        self.assertEqual(seen, [START, START, COMPLETE])
        self.assertTrue(any("502 <html><body><h1>502 Bad Gateway" in l for l in lines), lines)
        # Past the last try, the page is the refusal's message, not a crash.
        outcome, seen, lines = run_deploy({START: [PROXY_DOWN]}, retries=1)
        self.assertIsInstance(outcome, RuntimeError)
        self.assertIn("start answered 502 {'error': 'http', 'message': '<html>", str(outcome))
        self.assertEqual(seen, [START] * 2)


class FailsWhenTheWorkFails(unittest.TestCase):
    def test_the_action_fails_by_its_fence_and_is_never_completed(self):
        def work(object_id):
            raise OSError(f"no hypervisor for {object_id}")

        outcome, seen, lines = run_deploy({
            START: [(201, {"fence": 7})],
            FAIL: [UNAVAILABLE, (200, {"state": "VIRTUAL"})],
            COMPLETE: [(200, {"state": "RUNNING"})],
        }, work=work)
        self.assertIs(outcome, False)
        # The failure is told to the service (made again past the 503), and
        # the action is never completed.
        self.assertEqual(seen, [START, FAIL, FAIL])
        self.assertIn("vm-1: deploy failed (no hypervisor for vm-1)", lines)



class ListsPageByPage(unittest.TestCase):
    def test_each_next_is_the_after_of_the_next_page_and_the_first_page_says_where_to_watch(self):
        first = "/v1/vm/objects?state=VIRTUAL&limit=2"
        second = first + "&after=vm-2"
        script = {
            first: [(200, {"objects": [{"id": "vm-1"}, {"id": "vm-2"}], "next": "vm-2",
                           "last_event_id": 40})],
            second: [UNAVAILABLE, (200, {"objects": [{"id": "vm-3"}], "last_event_id": 41})],
        }
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
        server.script, server.seen = script, []
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            service = Service(
                f"http://127.0.0.1:{server.server_port}", "vm", "token",
                backoff=0.01, page=2,
            )
            # The first page's event id: the pages after it were read later,
            # so a watch from it misses no write any of them may not show.
            self.assertEqual(service.waiting("VIRTUAL"), (["vm-1", "vm-2", "vm-3"], "40"))
            # The second page made again past its 503, and no third asked for.
            self.assertEqual(server.seen, [first, second, second])
        finally:
            server.shutdown()
            server.server_close()


if __name__ == "__main__":
    unittest.main()
