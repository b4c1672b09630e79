"""GitHub Classroom: turn results.json into the autograding reporter's runner result.

`python -m grader.classroom results.json` prints the base64 payload that
.github/workflows/classroom.yml hands to classroom-resources/autograding-grading-reporter
(one test per component, its points as the score); `--points` prints "Points X/Y".
"""
from __future__ import annotations

import base64
import json
import sys
from pathlib import Path


def runner_result(results: dict) -> dict:
    """The reporter's schema: version, status, max_score and tests with name/status/score/message."""
    components: dict[str, dict] = {}
    for test in results.get("tests", []):
        entry = components.setdefault(test["tags"][0], {"score": 0.0, "max_score": 0.0, "failed": []})
        entry["score"] += test["score"]
        entry["max_score"] += test["max_score"]
        if test["status"] != "passed":
            entry["failed"].append(test["name"])
    tests = [{"name": name, "status": "pass" if not entry["failed"] else "fail",
              "score": round(entry["score"], 2), "max_score": round(entry["max_score"], 2),
              "message": "passed" if not entry["failed"] else "failing: " + ", ".join(entry["failed"]),
              "line_no": 0, "execution_time": "0s", "test_code": f"python -m grader check {name}"}
             for name, entry in components.items()]
    max_score = round(sum(t["max_score"] for t in tests), 2)
    status = "pass" if tests and all(t["status"] == "pass" for t in tests) else "fail"
    return {"version": 1, "status": status, "max_score": max_score, "tests": tests}


def main(argv: list[str]) -> int:
    results = json.loads(Path(argv[0]).read_text())
    result = runner_result(results)
    if "--points" in argv:
        print(f"Points {sum(t['score'] for t in result['tests']):g}/{result['max_score']:g}")
    else:
        print(base64.b64encode(json.dumps(result).encode()).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
