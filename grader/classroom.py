"""GitHub Classroom: grade once, and hand the points to the autograding reporter.

`python -m grader.classroom grade exercises` is the grading step of
.github/workflows/classroom.yml: it grades the folder once, writes
results.json (Gradescope's format), appends a Markdown summary to
$GITHUB_STEP_SUMMARY, writes `result=<payload>` to $GITHUB_OUTPUT (the base64
runner result that classroom-resources/autograding-grading-reporter reads: one
test per component, its points as the score) and prints "Points X/Y". Outside
GitHub Actions (those variables unset) it writes results.json and prints the points.

`python -m grader.classroom results.json` prints the payload of an existing
results.json; `--points` prints "Points X/Y" instead.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from pathlib import Path


def runner_result(results: dict) -> dict:
    """The reporter's schema: version, status, max_score and tests with name/status/score/message."""
    components: dict[str, dict] = {}
    for test in results.get("tests", []):
        entry = components.setdefault(test["tags"][0], {"score": 0.0, "max_score": 0.0, "failed": [], "first": ""})
        entry["score"] += test["score"]
        entry["max_score"] += test["max_score"]
        if test["status"] != "passed":
            entry["failed"].append(test["name"])
            entry["first"] = entry["first"] or f"{test['name']}: {test.get('output', '')}"
    tests = [{"name": name, "status": "pass" if not entry["failed"] else "fail",
              "score": round(entry["score"], 2), "max_score": round(entry["max_score"], 2),
              "message": "passed" if not entry["failed"] else f"failing: {', '.join(entry['failed'])}\n\n{entry['first']}",
              "line_no": 0, "execution_time": "0s", "test_code": f"python -m grader check {name}"}
             for name, entry in components.items()]
    max_score = round(sum(t["max_score"] for t in tests), 2)
    status = "pass" if tests and all(t["status"] == "pass" for t in tests) else "fail"
    return {"version": 1, "status": status, "max_score": max_score, "tests": tests}


def payload(result: dict) -> str:
    return base64.b64encode(json.dumps(result).encode()).decode()


def points(result: dict) -> str:
    return f"Points {sum(t['score'] for t in result['tests']):g}/{result['max_score']:g}"


def _append(variable: str, text: str) -> None:
    """Append to the file GitHub Actions names in `variable` (nothing outside Actions)."""
    path = os.environ.get(variable)
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(text)


def grade(folder: str, results: str = "results.json") -> int:
    """The workflow's grading step: one grading run, every output the workflow needs."""
    from .course import CourseError
    from .errors import GraderError
    from .report import to_gradescope, to_markdown, write_results
    from .runner import run_checks

    try:
        report = run_checks(folder)
    except (CourseError, GraderError) as exc:  # the grader's fault: fail the run, never report 0 points
        print(f"grader error: {exc}", file=sys.stderr)
        return 3
    write_results(report, results, "gradescope")
    result = runner_result(to_gradescope(report))
    _append("GITHUB_STEP_SUMMARY", to_markdown(report))
    _append("GITHUB_OUTPUT", f"result={payload(result)}\n")
    print(points(result))
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["grade"]:
        parser = argparse.ArgumentParser(prog="python -m grader.classroom grade")
        parser.add_argument("folder", nargs="?", default="exercises", metavar="DIR")
        parser.add_argument("--results", default="results.json", metavar="FILE")
        args = parser.parse_args(argv[1:])
        return grade(args.folder, args.results)
    parser = argparse.ArgumentParser(prog="python -m grader.classroom")
    parser.add_argument("results", metavar="results.json")
    parser.add_argument("--points", action="store_true", help='print "Points X/Y" instead of the payload')
    args = parser.parse_args(argv)
    result = runner_result(json.loads(Path(args.results).read_text()))
    print(points(result) if args.points else payload(result))
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as `python -m grader`: nothing to tear down, and torch's teardown is slow
