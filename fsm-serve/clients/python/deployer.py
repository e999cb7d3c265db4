#!/usr/bin/env python3
"""A controller for `fsm serve` in Python, with nothing but the standard library.

It deploys every OpenvCloud VM that is created: it watches the machine's writes
(Server-Sent Events), and for each VM that enters the initial state it starts
`deploy`, does the work the action stands for, and completes the action with the
fence token the start answered. It never reaches past the service's rules: a VM
another controller took (409) or that moved on (422) is left alone.

It stops and starts without losing a creation:

- on start it lists what is already waiting and deploys it, then watches from
  the list's `last_event_id` (`Last-Event-ID`): the service replays every write
  the list may not show, so a creation written in between is not missed (one
  the list showed may come again: its second start is refused);
- it keeps the id of the last event it handled in a file, and resumes the watch
  after it: the service replays what was written meanwhile. On etcd an event's
  id is its write's revision, so it may resume on any service of the store;
- on a `gap` event (writes the service could not replay) it lists and deploys
  what is waiting again, and watches from that list.

    FSM_TOKEN=... python3 deployer.py --url http://127.0.0.1:8080 --last-event last-event
"""

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


# Statuses that say the service could not take a call, which may go through
# when made again: its store is unavailable (503), or a proxy in front of it
# could not reach it (502, 504).
AGAIN = (502, 503, 504)


def error_body(raw):
    """An error answer's body: the service's JSON, or, from something else on
    the way (a proxy's page), the start of its text as the message."""
    try:
        body = json.loads(raw)
        if isinstance(body, dict):
            return body
    except ValueError:
        pass
    text = raw.decode("utf-8", "replace").strip()
    return {"error": "http", "message": text[:200]}


def retry_after(value, longest):
    """The seconds a `Retry-After` header asks a client to wait, at most
    `longest`; 0 when there is none or it is not a number of seconds (an
    HTTP date, which `fsm serve` never sends, is not waited for)."""
    try:
        return min(max(int(value), 0), longest)
    except (TypeError, ValueError):
        return 0


class Service:
    """The REST calls this controller makes, as one actor (its token's).

    A call the service could not take (503: its store is unavailable; 502 or
    504: a proxy in front of it could not reach it) or whose connection was
    lost is made again, `retries` times at most, waiting `backoff` seconds,
    then twice as long each time, and at least as long as the answer's
    `Retry-After` says (in seconds; `fsm serve` says 1 on every 503), up to
    `longest` seconds. An error whose body is not the service's JSON
    (a proxy's HTML page) is answered as `{"error": "http", "message": <the
    body's start>}`, so callers read every refusal the same way. Made again, a start that
    did go through the first time answers 409 (the object is held): the
    controller leaves it, and the healer rolls the hold back at its deadline,
    which the controller sees as a `Healed` write and deploys again.
    """

    def __init__(self, url, machine, token, retries=5, backoff=0.2, log=None, page=500, longest=30):
        self.base = f"{url.rstrip('/')}/v1/{urllib.parse.quote(machine, safe='')}"
        self.token = token
        self.retries, self.backoff, self.longest = retries, backoff, longest
        self.log = log or (lambda line: None)
        self.page = page

    def call(self, method, path, headers=None):
        """The status and JSON body of one request, made again while the
        service answers 503 or the connection is lost (see the class)."""
        request = urllib.request.Request(
            self.base + path,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", **(headers or {})},
        )
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            wait = self.backoff * 2**attempt
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return response.status, json.load(response)
            except urllib.error.HTTPError as refused:
                body = error_body(refused.read())
                if refused.code not in AGAIN or last:
                    return refused.code, body
                why = f"{refused.code} {body.get('message')}"
                wait = max(wait, retry_after(refused.headers.get("Retry-After"), self.longest))
            except (urllib.error.URLError, ConnectionError, TimeoutError) as lost:
                if last:
                    raise
                why = str(lost)
            self.log(f"{method} {path}: {why}; again in {wait:.1f} s")
            time.sleep(wait)

    def waiting(self, state):
        """The ids of the objects in `state`, listed `page` at a time (each
        answer's `next`, while it has one, is the next page's `after`), and
        the first page's `last_event_id`: where a watch misses none of the
        writes the pages may not show."""
        ids, query, last_event = [], {"state": state, "limit": self.page}, None
        while True:
            status, body = self.call("GET", "/objects?" + urllib.parse.urlencode(query))
            if status != 200:
                raise RuntimeError(f"listing {state}: {status} {body}")
            if last_event is None:
                last_event = str(body["last_event_id"])
            ids += [o["id"] for o in body["objects"]]
            if "next" not in body:
                return ids, last_event
            query["after"] = body["next"]

    def watch(self, last_event):
        """The open watch stream, resumed after `last_event` if given."""
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "text/event-stream"}
        if last_event is not None:
            headers["Last-Event-ID"] = last_event
        request = urllib.request.Request(self.base + "/watch", headers=headers)
        return urllib.request.urlopen(request, timeout=60)


def events(stream):
    """Each Server-Sent Event of `stream`: (name, id or None, JSON data)."""
    name, event_id, data = None, None, []
    for raw in stream:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if name is not None:
                yield name, event_id, json.loads("\n".join(data))
            name, event_id, data = None, None, []
        elif line.startswith(":"):
            continue  # a keep-alive comment
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "id":
                event_id = value
            elif field == "data":
                data.append(value)


class Deployer:
    """Deploys each object that enters `state` by `action`."""

    def __init__(self, service, state, action, work, log):
        self.service, self.state, self.action = service, state, action
        self.work, self.log = work, log
        self.deployed = 0

    def deploy(self, object_id):
        """Starts the action, does the work, completes it by its fence token.
        True when this controller deployed the object."""
        path = "/objects/" + urllib.parse.quote(object_id, safe="")
        status, started = self.service.call("POST", f"{path}/actions/{self.action}")
        if status in (409, 422):
            # Another controller holds it, or it has moved on: not ours.
            self.log(f"{object_id}: left alone ({started.get('error')}: {started.get('message')})")
            return False
        if status != 201:
            raise RuntimeError(f"{object_id}: start answered {status} {started}")
        fence = started["fence"]
        try:
            self.work(object_id)
        except Exception as failure:  # the work failed: so does the action
            self.service.call("POST", f"{path}/in-flight/{fence}/fail")
            self.log(f"{object_id}: {self.action} failed ({failure})")
            return False
        status, done = self.service.call("POST", f"{path}/in-flight/{fence}/complete")
        if status != 200:
            # 409 revoked: the healer rolled the action back meanwhile.
            self.log(f"{object_id}: completion refused ({status} {done.get('error')})")
            return False
        self.log(f"{object_id}: {self.action} done, now {done['state']}")
        self.deployed += 1
        return True

    def catch_up(self):
        """Deploys what waits in the state now; the event id to watch from."""
        waiting, last_event = self.service.waiting(self.state)
        self.log(f"catching up: {len(waiting)} in {self.state}")
        for object_id in waiting:
            self.deploy(object_id)
        return last_event


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--machine", default="vm")
    parser.add_argument("--state", default="VIRTUAL", help="deploy what enters this state")
    parser.add_argument("--action", default="deploy")
    parser.add_argument("--last-event", help="the file the last event's id is kept in")
    parser.add_argument("--exit-after", type=int, help="exit once this many are deployed")
    parser.add_argument("--page", type=int, default=500, help="list this many objects at a time")
    args = parser.parse_args()
    token = os.environ.get("FSM_TOKEN")
    if not token:
        sys.exit("deployer: set FSM_TOKEN to a token of the service's tokens file")

    def log(line):
        print(f"deployer: {line}", flush=True)

    def work(object_id):
        time.sleep(0.01)  # what a real deployment would do

    service = Service(args.url, args.machine, token, log=log, page=args.page)
    deployer = Deployer(service, args.state, args.action, work, log)
    last = None
    if args.last_event and os.path.exists(args.last_event):
        with open(args.last_event) as kept:
            last = kept.read().strip() or None

    def done():
        return args.exit_after is not None and deployer.deployed >= args.exit_after

    def keep(event_id):
        if args.last_event:
            with open(args.last_event, "w") as kept:
                kept.write(event_id)

    while not done():
        try:
            if last is None:
                # Nothing to resume after: what waits now, then the writes
                # from the list on.
                last = deployer.catch_up()
                keep(last)
            with service.watch(last) as stream:
                for name, event_id, data in events(stream):
                    if name == "gap":
                        # Writes were missed: list again, and watch from there.
                        log(f"gap: {data['message']}")
                        last = None
                        break
                    if name == "write":
                        # Created there, or rolled back there by the healer (a
                        # failure is not retried at once: it would fail again).
                        if data["to"] == args.state and data["kind"] in ("Created", "Healed"):
                            deployer.deploy(data["id"])
                        last = event_id
                        keep(last)
                    if done():
                        break
        except urllib.error.HTTPError as refused:
            body = error_body(refused.read())
            if refused.code not in AGAIN:  # a wrong token or machine: no retry helps
                sys.exit(f"deployer: the watch was refused: {refused.code} {body.get('message')}")
            log(f"the service is unavailable ({refused.code} {body.get('message')}); retrying")
            time.sleep(max(0.5, retry_after(refused.headers.get("Retry-After"), service.longest)))
        except (urllib.error.URLError, ConnectionError, TimeoutError) as lost:
            log(f"watch lost ({lost}); resuming")
            time.sleep(0.5)


if __name__ == "__main__":
    main()
