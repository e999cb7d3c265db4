// Drives the fsm serve page in headless Chromium while objects are created and
// moved over the API, and checks that the page follows:
//
//   node scripts/browser/page-check.mjs BASE_URL TOKEN
//
// The page must show, for machine `door` (fsm-serve/tests/specs/door.toml): the
// count of objects per state as they change, the object held by an action, and
// its history on a click; cut off, it must say so, and once back show what was
// written meanwhile; written faster than its summary is read, it must read one
// summary at a time and end on the last write; opened as a write is made, it
// must show it; a request waiting for a held object must show beside it,
// on a page opened before the hold, on one opened while it held, and on one
// whose watch was cut off and came back while it held; its token refused, it
// must say so and stop. It must follow the machine by its summary, never by
// listing every object, and every machine by one stream. Prints one JSON
// line, {"ok": true, "seen": [...]} or {"ok": false, "error": ...}; exits 0,
// 1, or 2 when Chromium or the driver is missing.
import { createRequire } from "node:module";
import net from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "package.json"));
let chromium;
try {
  ({ chromium } = require("playwright-core"));
} catch (e) {
  console.error(`missing: ${e.message} (run npm ci in ${here}, or scripts/setup)`);
  process.exit(2);
}

const [base, token] = process.argv.slice(2);
const call = async (method, path, body) => {
  const r = await fetch(base + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await r.json();
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${json.message}`);
  return json;
};

let browser;
try {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
} catch (e) {
  console.error(`missing: cannot start Chromium (${e.message.split("\n")[0]})`);
  process.exit(2);
}

// The page reaches the service through a proxy of this script's, which can
// cut its connections (and refuse new ones) to show how the page recovers, or
// answer them itself as a service that no longer takes the page's token.
const target = new URL(base);
const sockets = new Set();
const requests = [];
let mode = "pass"; // or "cut", or "unauthorized"
let unauthorized = 0;
const UNAUTHORIZED = JSON.stringify({ error: "unauthorized", message: "this token is no longer taken" });
const proxy = net.createServer((client) => {
  if (mode === "cut") return client.destroy();
  if (mode === "unauthorized") {
    client.on("error", () => {}).once("data", () => {
      unauthorized += 1;
      client.end("HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
        + `Content-Length: ${UNAUTHORIZED.length}\r\nConnection: close\r\n\r\n${UNAUTHORIZED}`);
    });
    return;
  }
  const upstream = net.connect(Number(target.port), target.hostname);
  // The requests the page makes, by their request lines.
  client.on("data", (chunk) => {
    for (const [, method, path] of chunk.toString("latin1").matchAll(/^([A-Z]+) (\S+) HTTP\/1\.1\r$/gm)) {
      requests.push(`${method} ${path}`);
    }
  });
  const close = () => {
    client.destroy();
    upstream.destroy();
    sockets.delete(client);
  };
  sockets.add(client);
  client.pipe(upstream);
  upstream.pipe(client);
  for (const end of [client, upstream]) end.on("error", close).on("close", close);
});
await new Promise((listening) => proxy.listen(0, "127.0.0.1", listening));
const via = `http://127.0.0.1:${proxy.address().port}`;

const seen = [];
try {
  const page = await browser.newPage();
  await page.goto(via + "/");
  // The diagram is there before any token.
  if (!(await page.locator("#machine-door svg").count())) throw new Error("no diagram for door");
  await page.fill("#token", token);
  await page.click("#login button");
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 10000 });
  const count = (state) => page.locator(`[data-machine="door"][data-state="${state}"]`).textContent();
  const until = async (state, want) => {
    await page.waitForFunction(
      ([state, want]) => document.querySelector(`[data-machine="door"][data-state="${state}"]`).textContent === want,
      [state, want],
      { timeout: 10000 },
    );
    seen.push(`${state}=${want}`);
  };
  await until("OPEN", "0");
  for (const id of ["d0", "d1", "d2"]) await call("POST", "/v1/door/objects", { id });
  await until("OPEN", "3");
  // The diagram shows the count in the state's box.
  await page.waitForFunction(
    () => document.querySelector('#machine-door svg text.fsm-count[data-state="OPEN"]').textContent === "3",
    null,
    { timeout: 10000 },
  );
  seen.push("diagram OPEN=3");
  // An action held: the count moves to its transition state, the object is listed.
  const started = await call("POST", "/v1/door/objects/d0/actions/close");
  await until("OPEN", "2");
  await until("CLOSING", "1");
  await page.waitForSelector("#inflight-door button.object", { timeout: 10000 });
  seen.push(`held=${await page.locator("#inflight-door button.object").first().textContent()}`);
  // Its history on a click.
  await page.click("#inflight-door button.object");
  await page.waitForFunction(() => document.getElementById("history-door").textContent.includes("Started close by"), null, { timeout: 10000 });
  seen.push("history");
  await call("POST", `/v1/door/objects/d0/in-flight/${started.fence}/complete`);
  await until("CLOSING", "0");
  await until("CLOSED", "1");
  if ((await count("OPEN")) !== "2") throw new Error("OPEN changed unexpectedly");
  // The watch cut off: the page says so, and once the service is back it
  // resumes after the last write it saw, so a write made meanwhile shows.
  mode = "cut";
  for (const socket of sockets) socket.destroy();
  await page.waitForFunction(() => document.getElementById("status").textContent.includes("reconnecting"), null, { timeout: 10000 });
  seen.push("reconnecting");
  await call("POST", "/v1/door/objects", { id: "d3" });
  mode = "pass";
  await until("OPEN", "3");
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 10000 });
  seen.push("connected");
  // A summary slow to read (300 ms here) while writes come faster: the page
  // reads one at a time, and the last one read shows the last write.
  let reading = 0, most = 0;
  await page.route("**/v1/door/summary", async (route) => {
    reading += 1;
    most = Math.max(most, reading);
    try {
      const response = await route.fetch();
      await new Promise((resolve) => setTimeout(resolve, 300));
      await route.fulfill({ response });
    } finally {
      reading -= 1;
    }
  });
  for (let n = 4; n < 12; n++) {
    await call("POST", "/v1/door/objects", { id: `d${n}` });
    await new Promise((resolve) => setTimeout(resolve, 30));
  }
  await until("OPEN", "11");
  await page.unroute("**/v1/door/summary");
  if (most !== 1) throw new Error(`${most} summaries were read at once`);
  seen.push("one summary at a time");
  // A write between a page's first summary and its watch: a second page, whose
  // stream is held until an object is created and numbered (this script's
  // own stream has met it), shows it, since it watches from the summaries'
  // `last_event_id`, not from when its stream opens.
  const stream = await fetch(base + "/v1/door/watch", { headers: { Authorization: `Bearer ${token}` } });
  const events = stream.body.pipeThrough(new TextDecoderStream()).getReader();
  const met = async (id) => {
    let buffer = "";
    while (!buffer.includes(`"id":"${id}"`)) {
      const { value, done } = await events.read();
      if (done) throw new Error(`the stream ended before ${id} was created`);
      buffer += value;
    }
  };
  const second = await browser.newPage();
  let held = false;
  await second.route("**/v1/watch", async (route) => {
    if (!held) {
      held = true;
      await call("POST", "/v1/door/objects", { id: "d12" });
      await met("d12");
    }
    await route.continue();
  });
  await second.goto(via + "/");
  await second.fill("#token", token);
  await second.click("#login button");
  await second.waitForFunction(
    () => document.querySelector('[data-machine="door"][data-state="OPEN"]').textContent === "12",
    null,
    { timeout: 10000 },
  );
  seen.push("OPEN=12 on a page opened as d12 was created");
  await events.cancel();
  await second.close();
  // A request waiting for a held object (`?wait`) shows beside it, though
  // nothing is written when it comes, and goes when its turn comes: on the
  // page that saw the hold begin, and on one opened while it held.
  const waitingFor = (on, id, want) => on.waitForFunction(
    ([id, want]) => [...document.querySelectorAll("#inflight-door tr")].some(
      (tr) => tr.querySelector("button.object")?.textContent === id
        && tr.querySelector("td.waiting")?.textContent === want,
    ),
    [id, want],
    { timeout: 10000 },
  );
  const painting = await call("POST", "/v1/door/objects/d5/actions/paint");
  await waitingFor(page, "d5", "");
  const third = await browser.newPage();
  await third.goto(via + "/");
  await third.fill("#token", token);
  await third.click("#login button");
  await waitingFor(third, "d5", "");
  const waiter = call("POST", "/v1/door/objects/d5/actions/close?wait=30");
  await waitingFor(page, "d5", "1");
  await waitingFor(third, "d5", "1");
  await third.close();
  seen.push("waiting=1");
  await call("POST", `/v1/door/objects/d5/in-flight/${painting.fence}/complete`);
  const closing = await waiter;
  await call("POST", `/v1/door/objects/d5/in-flight/${closing.fence}/complete`);
  await page.waitForFunction(() => !document.querySelector("#inflight-door tr"), null, { timeout: 10000 });
  seen.push("waited its turn");
  // Its watch cut off while an action holds an object, the page stops reading
  // the summary (it reads only while the stream is open); once back, it reads
  // every machine's again in a while, so a request that comes to wait for the
  // hold shows, though nothing was written while it was away nor since.
  const holding = await call("POST", "/v1/door/objects/d6/actions/paint");
  await waitingFor(page, "d6", "");
  mode = "cut";
  for (const socket of sockets) socket.destroy();
  await page.waitForFunction(() => document.getElementById("status").textContent.includes("reconnecting"), null, { timeout: 10000 });
  // Past the re-read that was due (every 2 s while held): it finds the stream closed.
  await new Promise((resolve) => setTimeout(resolve, 2500));
  mode = "pass";
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 10000 });
  const late = call("POST", "/v1/door/objects/d6/actions/close?wait=30");
  await waitingFor(page, "d6", "1");
  seen.push("waiting=1 after a reconnection");
  await call("POST", `/v1/door/objects/d6/in-flight/${holding.fence}/complete`);
  const lateClosing = await late;
  await call("POST", `/v1/door/objects/d6/in-flight/${lateClosing.fence}/complete`);
  await page.waitForFunction(() => !document.querySelector("#inflight-door tr"), null, { timeout: 10000 });
  // The token refused (401) when the watch reconnects: trying again will not
  // help, so the page says why and stops; it does not knock every second.
  mode = "unauthorized";
  for (const socket of sockets) socket.destroy();
  await page.waitForFunction(
    () => document.getElementById("status").textContent === "watch: this token is no longer taken",
    null,
    { timeout: 10000 },
  );
  seen.push("refused");
  // The loop has met its refusal.
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  await sleep(1500);
  const knocks = unauthorized;
  await sleep(3000);
  if (unauthorized !== knocks) throw new Error(`the page tried ${unauthorized - knocks} more times after a 401`);
  seen.push("stopped");
  // The page follows the machine by its summary, never by listing every
  // object (a list's answer grows with all of them).
  const summaries = requests.filter((r) => r === "GET /v1/door/summary").length;
  const lists = requests.filter((r) => /^GET \/v1\/[^/]+\/objects(\?|$)/.test(r));
  if (summaries === 0) throw new Error(`the page never asked for the summary: ${requests.join(", ")}`);
  if (lists.length) throw new Error(`the page listed every object: ${lists.join(", ")}`);
  seen.push("summaries");
  // One stream for every machine: a browser gives a host six connections
  // over HTTP/1.1, and a stream per machine would hold them all.
  const streams = requests.filter((r) => /^GET \/v1\/([^/]+\/)?watch$/.test(r));
  if (streams.some((r) => r !== "GET /v1/watch")) throw new Error(`a stream per machine: ${streams.join(", ")}`);
  seen.push("one stream");
  console.log(JSON.stringify({ ok: true, seen }));
  await browser.close();
  proxy.close();
  process.exit(0);
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: String(e.message || e), seen }));
  await browser.close();
  process.exit(1);
}
