"""Runs an SCXML document (fsm export --format scxml) in python-statemachine's
SCXML interpreter and checks it against cases computed from the table:

    python scripts/interchange/scxml_check.py MACHINE.scxml CASES.json

CASES.json: [{"events": [...], "expect": "STATE"}, ...]. For each case a fresh
machine takes the events in order; "expect" must be its active top-level state.
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
    failed = 0
    for i, case in enumerate(cases):
        sm = chart()
        for event in case["events"]:
            sm.send(event)
        active = sorted(set(sm.configuration_values) & tops)
        if active != [case["expect"]]:
            failed += 1
            print(json.dumps({"case": i, "events": case["events"], "expect": case["expect"], "got": active}, separators=(",", ":")))
    print(json.dumps({"cases": len(cases), "failed": failed}, separators=(",", ":")))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
