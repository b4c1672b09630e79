"""Student text is inert in every format (issue 29, property 6).

A submission's exception messages, its exception classes' names, a value a failure message quotes, a file that
does not load, and the names of students' folders carry terminal escape sequences (clear-screen, cursor moves,
OSC 8 links, OSC 52 clipboard writes, a fake full-marks table), BEL/NUL/backspace/carriage-return tricks, C1
controls, bidi overrides, rich markup, a backtick run longer than a Markdown fence with headings, tables and
remote images after it, XML breakers, GitHub workflow commands, spreadsheet formulas and a name that is not
UTF-8. Each channel's output must be inert: the terminal (through a real pseudo-terminal) gets no escape
sequence but rich's own colours, Markdown's fences hold (read as CommonMark reads them), JUnit parses, HTML has
no element or control character of theirs, the CSV has no formula and is UTF-8, JSON parses and round-trips.
Graded as root and as an ordinary user (selftests/test_hostile.py's), where the tests run as root.
"""
from __future__ import annotations

import csv
import html.parser
import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from selftests.bugs import SOLUTIONS
from selftests.test_hostile import USERS, run_as

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(600)

END = "END-OF-PAYLOAD"
# What a submission says, in one string: every trick at once, ending with a marker (the whole message is shown).
PAYLOAD = ("start\x1b[2J\x1b[H\x1b[3J\x1b[5A\x1b[31m" * 3
           + "\x1b]8;;http://evil.example/\x1b\\click me\x1b]8;;\x1b\\"  # OSC 8 hyperlink
           + "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: write the clipboard
           + "\x1b]0;owned title\x07"  # window title
           + "\n\x1b[2J\x1b[Hscaling        8/8  passed\ntotal      230/230\n"  # a fake full-marks table
           + "0/8\r8/8 ab\x08\x08XY bell\x07 nul\x00 vt\x0b ff\x0c del\x7f"  # overwrite tricks
           + " c1:\x9b2J\x9d0;t\x9c nel\x85"  # C1 controls
           + " bidi:\u202eevil\u202c \u2066iso\u2069 zw\u200bsp \ufeff lsep\u2028 nonchar\ufffe"
           + " [bold green]230/230[/] [link=http://evil.example]x[/link] :thumbs_up:"  # rich markup, emoji
           + "\n``````````\n# heading\n| a | b |\n|---|---|\n| 1 | 2 |\n"  # a fence longer than any
           + "![img](http://evil.example/p.png)\n<img src=x onerror=alert(1)>\n<script>alert(1)</script>\n"
           + "~~~\n```\n"
           + "</failure>]]><![CDATA[ & </testcase>\n"  # XML
           + "::error::pwned\n  ::add-mask::secret\n::stop-commands::tok\n"  # GitHub workflow commands
           + "=HYPERLINK(\"http://evil.example\",\"click\")\n中文保留 " + END)

# Where a submission's text enters a report, one component each (the rest is the reference):
SCORES = "    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))\n"
SPLIT = '    return rearrange(x, "b t (h d) -> b h t d", h=n_heads)\n'
ATTACKS = {
    # an exception's message
    "scaling": ("attention.py", SCORES, f"    raise ValueError({PAYLOAD!r})\n"),
    # an exception class's name (and a lone surrogate in its message)
    "masking": ("attention.py", "def causal_mask(", "def causal_mask(*args, **kwargs):\n"
                f"    raise type({PAYLOAD!r}, (Exception,), {{}})('lone \\ud800 surrogate ' + {PAYLOAD!r})\n\n\n"
                "def _unused_causal_mask("),
    # a value that a failure message quotes
    "head_splitting": ("attention.py", SPLIT, f"    return {PAYLOAD!r}\n"),
    # a file that does not load
    "sinusoidal_encoding": ("positional.py", "from __future__ import annotations\n",
                            f"from __future__ import annotations\nraise ImportError({PAYLOAD!r})\n"),
}
ATTACKED = sorted(ATTACKS)

# Students' folder names (grade-all): formulas, escape sequences, markup, bidi, and bytes that are not UTF-8.
NAMES = [b'=HYPERLINK("evil.example","click")', b"+cmd|' -C calc'!A0", b"@SUM(1+1)", b"-2+3",
         b"\tTAB", b"\rCR", "\uff1dFULLWIDTH".encode(), b"\x1b[2J\x1b]52;c;eA==\x07clear", b"[link=evil.example]markup", b"[bold]x",
         "\u202eevil".encode(), b"bad\xff\xfeutf8", b"\x9b31m"]
SURROGATES = re.compile("[\ud800-\udfff]")


def submission(dest: Path) -> Path:
    shutil.copytree(SOLUTIONS, dest, ignore=shutil.ignore_patterns("__pycache__"))
    for file, old, new in ATTACKS.values():
        path = dest / file
        source = path.read_text()
        assert source.count(old) == 1, (file, old)
        path.write_text(source.replace(old, new, 1))
    return dest


def run(user: str, *args: str, env: dict | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([*run_as(user), sys.executable, "-m", "grader", *args], cwd=cwd, capture_output=True,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}, timeout=500)


def in_pty(user: str, *args: str) -> bytes:
    """The command's output through a pseudo-terminal (what a learner's terminal receives), as bytes."""
    master, slave = pty.openpty()
    os.chmod(os.ttyname(slave), 0o666)
    proc = subprocess.Popen([*run_as(user), sys.executable, "-m", "grader", *args], cwd=ROOT, stdin=slave,
                            stdout=slave, stderr=slave, env={**os.environ, "COLUMNS": "200", "TERM": "xterm"})
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 300)
        if not ready:
            proc.kill()
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    proc.wait(timeout=60)
    return out


@pytest.fixture(scope="module", params=USERS)
def graded(request, tmp_path_factory):
    """The attacked submission graded once in every format (and once through a terminal, once in Chinese)."""
    user = request.param
    base = Path(tempfile.mkdtemp(prefix="drills-inert-"))
    base.chmod(0o777)
    folder = submission(base / "submission")
    out = base / "out"
    out.mkdir()
    out.chmod(0o777)
    files = {fmt: out / f"report.{fmt}" for fmt in ("json", "junit", "markdown", "html")}
    grade = run(user, "grade", str(folder), "--results", str(out / "results.json"), "--figures", "none",
                *(f"--also={fmt}={path}" for fmt, path in files.items()))
    assert grade.returncode == 0, grade.stderr[-3000:]
    summary, output = out / "summary.md", out / "output"
    classroom = run(user, "classroom", str(folder), "--results", str(out / "classroom.json"),
                    env={"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(output)}, cwd=out)
    assert classroom.returncode == 0, classroom.stderr[-3000:]
    result = {
        "user": user, "out": out, "grade": grade,
        "files": {fmt: path.read_bytes() for fmt, path in files.items()},
        "gradescope": (out / "results.json").read_bytes(),
        "summary": summary.read_bytes(), "runner": output.read_text(),
        "check": run(user, "check", *ATTACKED, "--target", str(folder), "-v"),
        "check_json": run(user, "check", *ATTACKED, "--target", str(folder), "--json"),
        "zh": run(user, "--lang", "zh", "check", *ATTACKED, "--target", str(folder)),
        "tty": in_pty(user, "check", *ATTACKED, "--target", str(folder), "-v"),
    }
    yield result
    shutil.rmtree(base, ignore_errors=True)


# --- what inert means, per format -------------------------------------------------------------------------------

RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\ufffe\uffff"
                 "\ud800-\udfff]")


def raw_characters(text: str, allowed: str = "") -> list[str]:
    return sorted({repr(c) for c in RAW.findall(text) if c not in allowed})


def all_strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from all_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from all_strings(v)


def markdown_outside_code(text: str) -> str:
    """The Markdown's lines that are not inside a fenced code block, as CommonMark closes fences."""
    outside, fence = [], None
    for line in text.split("\n"):
        if fence is None:
            opening = re.match(r"^ {0,3}(`{3,}|~{3,})", line)
            if opening and not (opening.group(1)[0] == "`" and "`" in line[opening.end():]):
                fence = opening.group(1)
            else:
                outside.append(line)
        elif re.match(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$", line):
            fence = None
    assert fence is None or True  # an unclosed fence runs to the end: its text is code either way
    return "\n".join(outside)


def assert_markdown_inert(text: str) -> None:
    outside = markdown_outside_code(text)
    for live in ("evil.example", "# heading", "| a | b |", "<img", "<script", "pwned", END, "[bold green]"):
        assert live not in outside, f"{live!r} is live Markdown outside the code blocks:\n{outside}"
    assert not raw_characters(text), raw_characters(text)
    assert text.count("# heading") >= len(ATTACKED) - 1  # the messages are there, inside the fences


# --- the channels ------------------------------------------------------------------------------------------------

def test_terminal_shows_every_control_character_escaped(graded):
    text = graded["check"].stdout.decode("utf-8")  # strict: valid UTF-8
    assert not raw_characters(text), raw_characters(text)
    for shown in (r"\x1b[2J", r"\x1b]52;c;cm0gLXJmIH4=\x07", r"\x9b2J", r"\u202e", r"\x0d8/8", r"\x00", r"\x08",
                  "[bold green]230/230[/]", ":thumbs_up:", END):
        assert shown in text, f"{shown!r} missing from:\n{text[-3000:]}"


def test_a_real_terminal_receives_only_riches_own_colours(graded):
    data = graded["tty"]
    text = data.decode("utf-8")
    # rich's own styling: SGR sequences only; nothing else starts with ESC, and no C1 control at all
    others = re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert not raw_characters(others, allowed="\r"), raw_characters(others, allowed="\r")  # \r\n: the pty's
    assert "\r" not in others.replace("\r\n", "\n")
    assert r"\x1b]52;c;cm0gLXJmIH4=\x07" in others and END in others


def test_chinese_output_shows_the_same_whole_message(graded):
    zh, en = graded["zh"].stdout.decode("utf-8"), graded["check"].stdout.decode("utf-8")
    assert graded["zh"].returncode == 0
    assert not raw_characters(zh), raw_characters(zh)
    assert "组件" in zh or "失败" in zh  # it is the Chinese table
    for shown in (r"\x1b]8;;http://evil.example/\x1b\\click me", r"\x1b]52;c;cm0gLXJmIH4=\x07", r"\u202eevil",
                  "[bold green]230/230[/]", "中文保留 " + END):
        assert shown in zh and shown in en, shown


def test_json_is_valid_round_trips_and_keeps_the_text_exactly(graded):
    for raw in (graded["check_json"].stdout, graded["files"]["json"]):
        text = raw.decode("utf-8")
        data = json.loads(text)
        assert json.loads(json.dumps(data)) == data
        assert not any(SURROGATES.search(s) for s in all_strings(data))
        messages = [c["message"] for c in data["components"] if c["id"] in ATTACKED]
        assert any(PAYLOAD in m for m in messages)  # JSON is data: the text as it came, escaped by JSON


def test_gradescope_shows_every_text_visible(graded):
    data = json.loads(graded["gradescope"].decode("utf-8"))
    strings = list(all_strings(data))
    assert not [s for s in strings if raw_characters(s)]
    assert END in data["output"] and r"\x1b[2J" in data["output"]


def test_junit_is_xml_that_parses_with_the_message_visible(graded):
    root = ET.fromstring(graded["files"]["junit"])
    failures = [f.text for f in root.iter("failure")]
    assert any(f and END in f and "</failure>]]><![CDATA[ & </testcase>" in f for f in failures)
    assert not [f for f in failures if f and raw_characters(f)]
    assert {s.get("name") for s in root.iter("testsuite")} >= set(ATTACKED)


def test_markdown_fences_hold(graded):
    assert_markdown_inert(graded["files"]["markdown"].decode("utf-8"))


def test_step_summary_and_classroom_runner_result_are_inert(graded):
    assert_markdown_inert(graded["summary"].decode("utf-8"))
    import base64

    payload = graded["runner"].strip().removeprefix("result=")
    result = json.loads(base64.b64decode(payload))
    messages = [t["message"] for t in result["tests"] if t["name"] in ATTACKED]
    assert messages and all(not raw_characters(m) for m in messages)
    for message in messages:
        assert not [line for line in message.splitlines() if line.lstrip().startswith("::")], message


class _Elements(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.add(tag)


def test_html_has_no_element_or_control_character_of_theirs(graded):
    text = graded["files"]["html"].decode("utf-8")
    parser = _Elements()
    parser.feed(text)
    assert not {"img", "script"} & parser.tags
    assert not raw_characters(text), raw_characters(text)
    assert "&lt;img src=x onerror=alert(1)&gt;" in text and END in text


# --- grade-all: the students' names ------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=USERS)
def class_graded(request):
    user = request.param
    base = Path(tempfile.mkdtemp(prefix="drills-inert-class-"))
    base.chmod(0o777)
    submissions, out = base / "submissions", base / "out"
    submissions.mkdir()
    out.mkdir()
    out.chmod(0o777)
    for i, raw in enumerate(NAMES):
        folder = Path(os.fsdecode(os.fsencode(submissions) + b"/" + raw))
        folder.mkdir()
        if i % 2 == 0 or b"\xff" in raw:  # the stubs (graded once, copied to the others); the rest hold nothing
            shutil.copytree(ROOT / "exercises", folder / "exercises", ignore=shutil.ignore_patterns("__pycache__"))
    proc = run(user, "grade-all", str(submissions), "--out", str(out), "--jobs", "1")
    yield user, proc, out
    shutil.rmtree(base, ignore_errors=True)


def test_grade_all_writes_a_gradebook_without_formulas(class_graded):
    user, proc, out = class_graded
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (out / "gradebook.csv").read_bytes().decode("utf-8")  # strict: valid UTF-8
    assert not raw_characters(text.replace("\n", "")), raw_characters(text)
    rows = list(csv.reader(text.splitlines()))
    assert len(rows) == 1 + len(NAMES)
    for row in rows[1:]:
        for cell in row:
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r", "\uff1d")), row
    names = [row[0] for row in rows[1:]]
    assert r"bad\xff\xfeutf8" in names and "'=HYPERLINK(\"evil.example\",\"click\")" in names
    assert r"\x1b[2J\x1b]52;c;eA==\x07clear" in names and "[link=evil.example]markup" in names
    graded = {row[0]: row[2] for row in rows[1:]}
    assert graded[r"bad\xff\xfeutf8"] == "not started"  # it was graded, not refused


def test_grade_all_results_and_messages_are_inert(class_graded):
    user, proc, out = class_graded
    for stream in (proc.stdout, proc.stderr):
        text = stream.decode("utf-8")
        assert not raw_characters(text.replace("\n", "")), (raw_characters(text), text[-2000:])
    for path in (out / "results").iterdir():
        data = json.loads(path.read_bytes().decode("utf-8"))
        assert not any(SURROGATES.search(s) for s in all_strings(data))
        assert not [s for s in all_strings(data.get("results", {})) if raw_characters(s)]


# --- the functions themselves, on more attacks than a grading can carry -------------------------------------------

@pytest.mark.parametrize("text", [
    PAYLOAD, "\x1bP+q\x1b\\", "\x1b[?1049h\x1b[?25l", "\x1bc", "\x1b7\x1b8", "\x9d8;;http://x\x9c", "\x90q\x9c",
    "\x1b[6n", "\x1b[21t", "a\rb", "a\x08b", "\x00", "\x7f", "\u061c\u200e\u200f\u202a\u202d\u2067\u2068",
    "\u00ad\u2060\u2064\ufff9", "\U000e0041\U000e007f", os.fsdecode(b"\xc0\xaf\xed\xa0\x80\xff"), "\ud800x\udfff",
])
def test_visible_leaves_no_control_format_or_undecodable_character(text):
    from grader.inert import visible

    shown = visible(text)
    assert not raw_characters(shown) and not re.search("[\u00ad\u2060-\u206f\ufff9-\ufffb\U000e0000-\U000e007f]", shown)
    shown.encode("utf-8")  # strict: no surrogate left
    ET.fromstring(f"<a>{shown.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;')}</a>")  # XML 1.0


def test_visible_keeps_what_a_person_reads():
    from grader.inert import visible

    text = "中文保留 — naïve café ✓ tab\there\nnew line [bold] `code` <b>"
    assert visible(text) == text
    assert visible(os.fsdecode(b"bad\xff")) == r"bad\xff" and visible("\x1b") == r"\x1b"


@pytest.mark.parametrize("cell", ['=1+1', '+1', '-1', '@SUM(A1)', '\t=1', '\r=1', '\uff1d1', '=HYPERLINK("x")',
                                  '\x1b=1'])
def test_csv_cells_start_no_formula(cell):
    from grader.inert import csv_cell

    shown = csv_cell(cell)
    assert shown.startswith("'") or not shown.startswith(("=", "+", "-", "@", "\t", "\r", "\uff1d"))
    assert not raw_characters(shown)


@pytest.mark.parametrize("runs", [0, 3, 4, 10, 50])
def test_a_markdown_fence_is_longer_than_any_backtick_run(runs):
    from grader.inert import markdown_block

    text = "`" * runs + "\n# heading\n" + "  " + "`" * runs + "\n![i](http://evil.example)\n~~~~\n<b>x</b>"
    block = "\n".join(markdown_block(text))
    assert markdown_outside_code(block).strip() == ""


def test_markdown_inline_text_starts_nothing():
    from grader.inert import markdown_inline

    shown = markdown_inline("![i](http://evil.example) <img src=x> | cell | **b** [l](u)\n# h")
    assert "\n" not in shown and "<img" not in shown
    assert not re.search(r"(?<!\\)[|*\[\]!()#`<>_]", shown), shown  # every mark escaped


def test_notebook_feedback_prints_every_text_escaped(monkeypatch, capsys):
    from grader.channels.nbgrader import notebook

    check = {"name": "test_x", "score": 0, "max_score": 1, "status": "failed", "message": PAYLOAD}
    report = {"components": [{"id": "scaling", "status": "failed", "max_score": 1, "message": PAYLOAD,
                              "checks": [check], "figures": []}]}
    monkeypatch.setattr(notebook, "grade_folder", lambda folder: report)
    notebook.grade_component("scaling", hidden=False, folder="unused")
    out = capsys.readouterr().out
    assert not raw_characters(out) and END in out and r"\x0d8/8" in out
