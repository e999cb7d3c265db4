"""Runs an SCXML document (fsm export --format scxml) in python-statemachine's
SCXML interpreter and checks it against cases computed from the table:

    python scripts/interchange/scxml_check.py MACHINE.scxml CASES.json

CASES.json: [{"events": [...], "expect": "STATE"}, ...]. For each case a fresh
machine takes the events in order; "expect" must be its active top-level state,
or, for a table imported from nested states (whose states are the document's
states without children), the active one of those.
Prints one JSON line per disagreement and a last line {"cases": N, "failed": M};
exits 0 when none failed, 1 otherwise, 2 when python-statemachine is missing.
"""

import json
import sys

try:
    from statemachine.io import load
except ImportError as e:  # pragma: no cover
    print(f"missing: {e} (scripts/setup installs python-statemachine)", file=sys.stderr)
    sys.exit(2)


def main() -> int:
    machine_file, cases_file = sys.argv[1:3]
    chart = load(machine_file)
    with open(cases_file, encoding="utf-8") as f:
        cases = json.load(f)
    tops = {s.id for s in chart.states}
    # The states the table names that are not top-level: nested ones.
    named = tops | {c["expect"] for c in cases}
    failed = 0
    for i, case in enumerate(cases):
        sm = chart()
        for event in case["events"]:
            sm.send(event)
        # A nested state is active with its parents: the table names the
        # innermost one the cases name.
        active = sorted(set(sm.configuration_values) & named)
        if case["expect"] not in tops:
            active = [s for s in active if s not in tops] or active
        if active != [case["expect"]]:
            failed += 1
            print(json.dumps({"case": i, "events": case["events"], "expect": case["expect"], "got": active}, separators=(",", ":")))
    print(json.dumps({"cases": len(cases), "failed": failed}, separators=(",", ":")))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
