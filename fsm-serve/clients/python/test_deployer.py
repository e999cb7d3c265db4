"""Tests of deployer.py against a scripted stand-in for `fsm serve`: what the
controller does when the service answers 503 (its store unavailable), which a
real service gives only while etcd is down.

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

    def do_POST(self):
        self.server.seen.append(self.path)
        answers = self.server.script[self.path]
        status, body = answers.pop(0) if len(answers) > 1 else answers[0]
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


UNAVAILABLE = (503, {"error": "unavailable", "message": "the store is unavailable"})
START = "/v1/vm/objects/vm-1/actions/deploy"
COMPLETE = "/v1/vm/objects/vm-1/in-flight/7/complete"


class RetriesOn503(unittest.TestCase):
    def run_deploy(self, script, retries=3):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
        server.script, server.seen = script, []
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            lines = []
            service = Service(
                f"http://127.0.0.1:{server.server_port}", "vm", "token",
                retries=retries, backoff=0.01, log=lines.append,
            )
            deployer = Deployer(service, "VIRTUAL", "deploy", lambda _: None, lines.append)
            try:
                outcome = deployer.deploy("vm-1")
            except RuntimeError as raised:
                outcome = raised
            return outcome, server.seen, lines
        finally:
            server.shutdown()
            server.server_close()

    def test_a_start_and_a_completion_are_made_again_until_the_store_takes_them(self):
        outcome, seen, lines = self.run_deploy({
            START: [UNAVAILABLE, UNAVAILABLE, (201, {"fence": 7})],
            COMPLETE: [UNAVAILABLE, (200, {"state": "RUNNING"})],
        })
        self.assertIs(outcome, True, lines)
        self.assertEqual(seen, [START] * 3 + [COMPLETE] * 2)
        self.assertEqual(sum("503 the store is unavailable; again in" in l for l in lines), 3, lines)

    def test_a_start_the_store_never_takes_raises_after_the_last_try(self):
        outcome, seen, lines = self.run_deploy({START: [UNAVAILABLE]}, retries=2)
        self.assertIsInstance(outcome, RuntimeError)
        self.assertIn("start answered 503", str(outcome))
        self.assertEqual(seen, [START] * 3)

    def test_a_refusal_is_not_made_again(self):
        busy = (409, {"error": "busy", "message": "vm-1 is held by deploy"})
        outcome, seen, lines = self.run_deploy({START: [busy, (201, {"fence": 7})]})
        self.assertIs(outcome, False)
        self.assertEqual(seen, [START])


if __name__ == "__main__":
    unittest.main()
