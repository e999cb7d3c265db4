// Runs an XState v5 machine config (fsm export --format xstate, or one written
// by hand that fsm import xstate read) in XState and checks it against cases
// computed from the table:
//
//   node scripts/interchange/xstate-check.mjs MACHINE.json CASES.json
//
// CASES.json: [{"events": [...], "expect": "STATE"}, ...]. For each case a fresh
// actor takes the events in order; its state's top-level node must be "expect"
// (its whole path, `a.b`, when "expect" has a dot: a table imported from nested
// states names its states so).
// Every guard the config names passes (the table's answer is the move an action
// makes once its guards pass), and every named action does nothing.
// Prints one JSON line per disagreement and a last line {"cases": N, "failed": M};
// exits 0 when none failed, 1 otherwise, 2 when XState is missing.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "package.json"));
let xstate;
try {
  xstate = require("xstate");
} catch (e) {
  console.error(`missing: ${e.message} (run npm ci in ${here}, or scripts/setup)`);
  process.exit(2);
}
const { createMachine, createActor } = xstate;

const [machineFile, casesFile] = process.argv.slice(2);
const config = JSON.parse(readFileSync(machineFile, "utf8"));
const guards = {};
const actions = {};
const named = (v) => (typeof v === "string" ? v : v && typeof v.type === "string" ? v.type : null);
const walk = (v) => {
  if (Array.isArray(v)) return v.forEach(walk);
  if (!v || typeof v !== "object") return;
  for (const [key, x] of Object.entries(v)) {
    if (key === "guard" && named(x)) guards[named(x)] = () => true;
    if (["actions", "entry", "exit"].includes(key)) {
      for (const a of [x].flat()) if (named(a)) actions[named(a)] = () => {};
    }
    walk(x);
  }
};
walk(config);
const machine = createMachine(config, { guards, actions });
const cases = JSON.parse(readFileSync(casesFile, "utf8"));

const top = (value) => (typeof value === "string" ? value : Object.keys(value)[0]);
// The whole path, `a.b.c`: a table imported from nested states names each
// state by it.
const path = (value) => {
  if (typeof value === "string") return value;
  const [[state, inner]] = Object.entries(value);
  return `${state}.${path(inner)}`;
};
let failed = 0;
for (const [i, c] of cases.entries()) {
  const actor = createActor(machine).start();
  for (const type of c.events) actor.send({ type });
  const value = actor.getSnapshot().value;
  const got = c.expect.includes(".") ? path(value) : top(value);
  actor.stop();
  if (got !== c.expect) {
    failed += 1;
    console.log(JSON.stringify({ case: i, events: c.events, expect: c.expect, got }));
  }
}
console.log(JSON.stringify({ cases: cases.length, failed }));
process.exit(failed ? 1 : 0);
