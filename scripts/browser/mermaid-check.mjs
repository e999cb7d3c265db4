// Renders Mermaid diagrams with Mermaid itself, in headless Chromium, and prints
// one JSON line per file: {"file": ..., "svg": ...} or {"file": ..., "error": ...}.
//
//   node scripts/browser/mermaid-check.mjs FILE.mmd...
//
// Chromium is Debian's (/usr/bin/chromium, or $CHROMIUM); Mermaid and
// playwright-core come from this folder's node_modules (`npm ci` here, which
// scripts/setup runs). Exits 0 when every diagram rendered, 1 when one did not,
// 2 when the tools are missing.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "package.json"));

let chromium, mermaidJs;
try {
  ({ chromium } = require("playwright-core"));
  mermaidJs = readFileSync(require.resolve("mermaid/dist/mermaid.min.js"), "utf8");
} catch (e) {
  console.error(`missing: ${e.message} (run npm ci in ${here}, or scripts/setup)`);
  process.exit(2);
}

const files = process.argv.slice(2);
let browser;
try {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
} catch (e) {
  console.error(`missing: cannot start Chromium (${e.message.split("\n")[0]})`);
  process.exit(2);
}
const page = await browser.newPage();
await page.setContent("<!doctype html><html><body></body></html>");
await page.addScriptTag({ content: mermaidJs });
await page.evaluate(() => window.mermaid.initialize({ startOnLoad: false, securityLevel: "strict" }));

let failed = false;
for (const [i, file] of files.entries()) {
  const text = readFileSync(file, "utf8");
  const result = await page.evaluate(
    async ([id, text]) => {
      try {
        const { svg } = await window.mermaid.render(id, text);
        return { svg };
      } catch (e) {
        return { error: String(e && e.message ? e.message : e) };
      }
    },
    [`d${i}`, text],
  );
  if (result.error) failed = true;
  console.log(JSON.stringify({ file, ...result }));
}
await browser.close();
process.exit(failed ? 1 : 0);
