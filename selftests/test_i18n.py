"""Chinese and English (grader/i18n.py): complete catalogues, the language's selection, Chinese output and
stubs that hold the same code, and scores that do not depend on the language.

A failing check's message (grader/check_text.py translates it where the grader scores) is checked on a
sample of the bug catalogue graded in Chinese, one bug for each check that some bug fails, and on the whole
catalogue's English reports translated in-process.
"""
from __future__ import annotations

import ast
import io
import json
import os
import re
import string
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from grader import i18n
from grader.contract import COMPONENTS, OWNERS
from grader.course import load_course
from grader.drills.workspace import WORDED_TODO
from grader.pristine import STUB_FILES, translated_stubs_dir
from grader.syntax import code_without_docstrings

ROOT = Path(__file__).resolve().parent.parent
ZH_STUBS = translated_stubs_dir("zh")
CJK = re.compile(r"[\u4e00-\u9fff]")


def grader(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in i18n.ENV_VARS} | (env or {})
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env)


# --------------------------------------------------------------------------- the catalogue


def _extracted() -> set[tuple[str | None, str]]:
    """(context, msgid) of every text the code and course.yml mark, extracted afresh as babel.cfg says."""
    from babel.messages import frontend
    from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir

    parse = getattr(frontend, "parse_mapping_cfg", None) or frontend.parse_mapping
    with open(ROOT / "babel.cfg", encoding="utf-8") as cfg:
        method_map, options_map = parse(cfg)
    keywords = {**DEFAULT_KEYWORDS, "N_": None, "Phrase": None}  # as the Makefile's `-k N_ -k Phrase`
    found = set()
    for _file, _line, message, _comments, context in extract_from_dir(str(ROOT), method_map, options_map, keywords):
        found.add((context, message[0] if isinstance(message, tuple) else message))
    return found


def _catalogue():
    from babel.messages.pofile import read_po

    with open(i18n.po_path("zh"), "rb") as po:
        return read_po(po)


def _fields(text: str) -> list[str]:
    return sorted(field for _, field, _, _ in string.Formatter().parse(text) if field is not None)


def test_every_message_has_both_languages():
    catalogue = _catalogue()
    extracted = _extracted()
    entries = {(m.context, m.id[0] if isinstance(m.id, tuple) else m.id): m for m in catalogue if m.id}
    assert extracted - set(entries) == set(), "run `make messages` and translate the new entries"
    assert set(entries) - extracted == set(), "entries the code no longer has: run `make messages`"
    for key, message in entries.items():
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        assert all(s.strip() for s in strings), f"untranslated: {key}"
        assert not message.fuzzy, f"fuzzy (its English changed; check the translation): {key}"
        sources = message.id if isinstance(message.id, tuple) else (message.id,)
        for s in strings:  # str.format placeholders: a missing or misspelt one would raise or drop a value
            assert _fields(s) == _fields(sources[-1]), f"placeholders differ in {key}: {s!r}"


def test_babels_checkers_pass():
    problems = [(m.id, [str(e) for e in errors]) for m, errors in _catalogue().check()]
    assert problems == []


def test_the_template_is_up_to_date():
    from babel.messages.pofile import read_po

    with open(ROOT / "grader" / "locale" / "grader.pot", "rb") as pot:
        template = {(m.context, m.id[0] if isinstance(m.id, tuple) else m.id) for m in read_po(pot) if m.id}
    assert template == _extracted(), "run `make messages`"


def test_course_texts_are_keyed_by_id():
    course = load_course()
    for component in course.components:
        for text in (component.title, *component.hint_ladder, component.hint):
            assert i18n.catalogue("zh").pgettext(i18n.course_context(component.id), text) != "" and \
                i18n.course_text(component.id, text, "zh")
        assert CJK.search(i18n.course_text(component.id, component.title, "zh")), component.id
        assert CJK.search(i18n.course_text(component.id, component.hint, "zh")), component.id


def test_the_catalogue_compiles_once_and_loads_without_babel(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    code = ("import sys, grader.i18n as i; t = i.catalogue('zh'); "
            "print(t.gettext('passed'), 'babel' in sys.modules)")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    first = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    again = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert first.stdout.split() == ["通过", "True"], first.stderr
    assert again.stdout.split() == ["通过", "False"], again.stderr  # the cached .mo: no Babel on the hot path
    assert len(list((tmp_path / "transformer-drills").glob("grader-zh_CN-*.mo"))) == 1


# --------------------------------------------------------------------------- choosing the language


@pytest.mark.parametrize("env, lang", [
    ({}, "en"),
    ({"LANG": "zh_CN.UTF-8"}, "zh"),
    ({"LANG": "zh_TW"}, "zh"),
    ({"LANG": "fr_FR.UTF-8"}, "en"),
    ({"LANG": "C.UTF-8"}, "en"),
    ({"LANG": "en_US.UTF-8", "LC_MESSAGES": "zh_CN"}, "zh"),
    ({"LANG": "zh_CN.UTF-8", "LC_MESSAGES": "en_US"}, "en"),
    ({"LC_ALL": "zh_CN.UTF-8", "LC_MESSAGES": "en_US", "LANG": "en_US"}, "zh"),
    ({"LC_ALL": "", "LANG": "zh_CN"}, "zh"),  # an empty variable is not set
])
def test_the_locale_order(env, lang):
    assert i18n.language_from_env(env) == lang


def test_lang_option_beats_the_locale_before_or_after_the_verb():
    zh = {"LANG": "zh_CN.UTF-8"}
    assert "component" in grader("--lang", "en", "check", "masking", env=zh).stdout
    assert "组件" in grader("check", "masking", "--lang", "zh").stdout
    assert "组件" in grader("check", "masking", env=zh).stdout
    assert "component" in grader("check", "masking").stdout
    assert "为 exercises/ 评分" in grader("--lang=zh", "--help").stdout
    result = grader("check", "--lang", "xx")
    assert result.returncode == 2 and "invalid choice" in result.stderr


# --------------------------------------------------------------------------- no English prose in Chinese output

# Words that are code or names, not English prose (besides identifiers of the contract and the checks).
CODE_WORDS = {"True", "False", "None", "softmax", "dtype", "inf", "Python", "PID", "NotImplementedError", "TCP",
              "TODO", "TinyLM", "ViT", "Swin", "RoPE", "LayerNorm", "RMSNorm", "SwiGLU", "AdamW", "GQA", "NONE",
              "bool", "dim", "sin", "cos", "exp", "log", "sqrt", "argmax",  # math and tensor vocabulary, as in code
              "logits", "idx", "lr", "eps", "ws", "wd", "kv", "nan", "NaN", "meta", "SDPA", "MLP", "GELU", "ReLU",
              "Linear", "dropout", "ValueError", "NoneType", "int", "float", "list", "dict", "tuple", "len", "max",
              "return", "view", "reshape", "eval", "out", "weights", "Tq", "Tk", "Dh", "xj", "yj",  # as code writes them
              "silu", "sigmoid", "gather", "stack", "squeeze", "expand", "triu", "mean", "var", "pi", "kth", "xi", "yi",
              "nW", "Py", "Px", "Hkv", "start", "torch", "Tensor", "Parameter", "cpu", "GLU", "GeGLU", "ReGLU",
              "Adam", "nanoGPT", "LLaMA", "RoFormer", "Hugging", "Face", "Meta", "Transformer",  # works, makers
              "Debian",  # where the font note says how to install a CJK font
              "Landlock", "root", "id",  # the sandbox's words: the kernel's feature, the superuser, a user id
              "DPO", "IPO", "PPO", "GRPO", "DAPO", "TRL", "KL",  # the interview track's methods and library
              "kl", "std", "min", "clamp", "logsigmoid", "detach",  # its tensor vocabulary, as code writes it
              "policy", "ref", "margin", "ratio", "surrogate", "picked",  # the names its formulas write
              "BPE", "PAT", "str",  # the seq2seq track's method, the contract's pre-tokenizer pattern, a type
              "aa"}  # a merged token in its examples ("a a a" becomes "aa a")


@lru_cache(maxsize=None)
def _identifiers() -> frozenset[str]:
    names = set(COMPONENTS) | {"transformer", "drills", "namespaces", "landlock", "users", "none"}
    for module, owners in OWNERS.items():
        names.add(module)
        for qualname in owners:
            names.update(qualname.split("."))
    for component in load_course().components:
        names.update(component.checks)
    for folder in ("exercises", "solutions"):  # the contract's parameters, attributes and methods (mask, head, ...)
        for path in (ROOT / folder).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.arg):
                    names.add(node.arg)
                elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    names.add(node.name)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and \
                        isinstance(node.value, ast.Name) and node.value.id == "self":
                    names.add(node.attr)
    return frozenset(names)


# A Python string or bytes literal where a value stands: an argument (after "(", "[", "{", ",", "=" or ":") or a
# value a Chinese message shows (after a Chinese word): data a check passed or got back (`encode('abc ab')`),
# not prose. A quoted phrase inside English words ("True means 'may attend'") is still read.
DATA = re.compile(r"""(?<=[(\[{,=:\u4e00-\u9fff\uff08\uff1a\uff0c])\s*b?(['"])(?:\\.|(?!\1).)*\1""")


def english_prose(text: str) -> list[str]:
    """The English words of `text` that are not code: tokens holding only letters, not identifiers. Code in
    backticks is not prose, nor is an error's own text that a Chinese message quotes as it came, 「...」 (what
    torch or the learner's code raised, which no catalogue translates), nor a string a check shows as data
    (DATA)."""
    text = re.sub(r"`[^`\n]*`|「[^」]*」", " ", text)
    text = DATA.sub(" ", text)
    allowed = _identifiers() | CODE_WORDS
    words = []
    for token in re.split(r"[\s\u3000-\u303f\uff00-\uffef\u4e00-\u9fff“”‘’…]+", text):
        token = token.strip(",;:!?\"'")
        if not re.fullmatch(r"[A-Za-z]{2,}", token):
            continue  # numbers, paths, code (q @ k^T, k_len - q_len, nn.Linear(...)), the empty string
        if token not in allowed:
            words.append(token)
    return words


def visible_text(page: str) -> str:
    """The words an HTML page shows: no style sheet, markup or <code>, entities decoded."""
    import html

    page = re.sub(r"<style>.*?</style>|<code>.*?</code>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_the_prose_detector_sees_english():
    assert english_prose("masking: not started\n  hint: True means 'may attend'") == ["not", "started", "hint",
                                                                                      "means", "may", "attend"]
    assert english_prose("masking：未开始\n  提示：True 表示“可以关注”，j <= i + (k_len - q_len)") == []


def test_the_refusal_below_the_intended_protection_reads_in_chinese(capsys):
    """Grading others below the intended protection is refused, and a learner's own check warned, in the
    learner's language, with the protection described in it too."""
    from grader.engine import runner
    from grader.errors import GraderError

    i18n.set_language("zh")
    try:
        with pytest.raises(GraderError) as refused:
            runner.require_protection("users")
        runner._warned.discard("none")
        runner.require_protection("none", own_code=True)
    finally:
        i18n.set_language(None)
    for text in (str(refused.value), capsys.readouterr().err):
        assert CJK.search(text) and "--accept-protection" in text, text
        assert english_prose(text) == [], (english_prose(text), text)


def test_an_errors_own_text_is_quoted_as_it_came_never_read():
    """The text of an error that student code raised is a field the translation quotes, 「...」, as it came:
    never matched against the catalogue, however much of it reads like the checks' own words."""
    from grader.check_text import render
    from grader.sandbox.protocol import StudentError
    from grader.text import Phrase

    words = "expected a torch.Tensor, got (2, 3): expected shape (2, 3), got (3, 2): not started: " + \
        "your code raised " * 100
    raised = StudentError("ValueError", words)
    shown = render(Phrase("{what}: {problem}", what="f(x)", problem=raised.describe()), "zh")
    assert shown == f"f(x)：你的代码抛出了「ValueError: {words}」", shown


def test_a_plain_text_is_translated_whole_or_not_at_all():
    """A text without fields is its own id: translated where the catalogue holds it whole, else shown as it is
    (a part of it that reads like a check's words is never picked out)."""
    from grader.check_text import render

    assert render("functions must not modify their inputs in place", "zh") != \
        "functions must not modify their inputs in place"
    text = "my own words: functions must not modify their inputs in place"
    assert render(text, "zh") == text


def test_a_chinese_check_holds_no_english_prose(tmp_path):
    solved = grader("--lang", "zh", "check", "masking", "scaling", "-v", "--target", str(ROOT / "solutions"))
    stubs = grader("--lang", "zh", "check", "masking", "kv_cache", "sinusoidal_encoding", "-v", "--hints")
    for result in (solved, stubs):
        assert result.returncode == 0, result.stderr
        assert english_prose(result.stdout) == [], result.stdout
    assert "通过" in solved.stdout and "未开始" in stubs.stdout and "提示：" in stubs.stdout


def test_code_that_does_not_load_hangs_or_crashes_is_told_so_in_chinese(tmp_path):
    """The grader's own words for a file that does not import, a call that hangs, a worker that dies and a
    missing file, in Chinese (the error's own text quoted as it came, 「...」)."""
    import shutil

    folder = tmp_path / "impl"
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "ffn.py").write_text((folder / "ffn.py").read_text() + "\ndef oops(:\n")
    norms = (folder / "norms.py").read_text()
    ms = "ms = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)"
    assert ms in norms
    (folder / "norms.py").write_text(norms.replace(ms, ms + "\n        while True: pass"))
    rope = (folder / "rope.py").read_text()
    (folder / "rope.py").write_text(rope.replace("def apply_rope(", "def apply_rope(*args, **kwargs):\n"
                                                 "    import os; os._exit(3)\n\n\ndef _unused(", 1))
    (folder / "sampling.py").unlink()
    result = grader("--lang", "zh", "check", "swiglu", "rms_norm", "rope", "sampling", "--timeout", "1",
                    "--target", str(folder))
    assert result.returncode == 0, result.stderr
    for words in ("导入失败", "超时", "进程以状态 3 退出", "提交中缺少 sampling.py"):
        assert words in result.stdout, result.stdout
    assert english_prose(result.stdout) == [], result.stdout


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_gradescope_and_classroom_give_feedback_in_the_bundles_language(tmp_path, lang):
    """The autograder zip and a release's Classroom workflow grade with the language they were built in (the
    graders' machines have a locale of their own)."""
    import zipfile

    assert grader("--lang", lang, "gradescope", str(tmp_path / "autograder.zip")).returncode == 0
    run = zipfile.ZipFile(tmp_path / "autograder.zip").read("run_autograder").decode()
    assert f"-m grader --lang {lang} grade" in run
    assert ("评分器失败了" in run) == (lang == "zh")
    assert grader("--lang", lang, "release", str(tmp_path / "bundle")).returncode == 0
    workflow = (tmp_path / "bundle" / ".github" / "workflows" / "classroom.yml").read_text()
    assert f"python -m grader --lang {lang} classroom exercises" in workflow


# Names of models, people's tools and products, written as they are in Chinese too (course titles, README).
NAMES = {"Transformer", "Softmax", "Vision", "PyTorch", "Gradescope", "nbgrader", "GitHub", "Classroom", "CPU",
         "zip", "torch", "Jupyter", "Linux", "macOS", "Windows", "PowerShell", "cmd", "PyPI", "CUDA", "GB"}


def _kept_in_course_texts() -> set[str]:
    """Words a course.yml translation keeps as the English wrote them: the names in its formulas (weight, bias,
    ws, logits...). test_course_texts_are_keyed_by_id makes sure that each one is translated at all."""
    words = set()
    for component in load_course().components:
        for text in (component.title, component.hint, *component.hint_ladder):
            english = set(re.findall(r"[A-Za-z]+", text))
            words |= english & set(re.findall(r"[A-Za-z]+", i18n.course_text(component.id, text, "zh")))
    return words


def test_a_chinese_grade_holds_no_english_prose_in_any_format(tmp_path):
    """Every format of `grade` in Chinese: the words a person reads (ids, statuses as ids, tags aside), a
    failing check's first line ("<the call>: <problem>") and a not-started one's included."""
    import xml.etree.ElementTree as ET

    from selftests.bugs import all_bugs, materialize

    folder = materialize(next(b for b in all_bugs() if b.id == "sinusoidal_encoding:sin_cos_swapped"),
                         tmp_path / "impl")
    (folder / "swin.py").write_text((ROOT / "exercises" / "swin.py").read_text())  # two components not started
    out = {fmt: tmp_path / f"report.{fmt}" for fmt in ("json", "markdown", "junit", "html")}
    result = grader("--lang", "zh", "grade", str(folder), "--results", str(tmp_path / "results.json"),
                    *[arg for fmt, path in out.items() for arg in ("--also", f"{fmt}={path}")])
    assert result.returncode == 0, result.stderr
    report = json.loads(out["json"].read_text(encoding="utf-8"))
    gradescope = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    junit = ET.fromstring(out["junit"].read_text(encoding="utf-8"))
    failed = {c["id"]: c["status"] for c in report["components"] if c["status"] != "passed"}
    assert failed == {"sinusoidal_encoding": "failed", "swin_windows": "not started",
                      "window_attention": "not started"}
    texts = {
        "stdout": result.stdout,
        "json": "\n".join(str(c[key]) for c in report["components"] for key in ("title", "hint", "message"))
        + "\n".join(check["message"] + "\n" + check["gated"] for c in report["components"] for check in c["checks"]),
        "gradescope": "\n".join([gradescope["output"], *(test["output"] for test in gradescope["tests"])]),
        "markdown": out["markdown"].read_text(encoding="utf-8").replace("```", ""),  # a message's fence
        "junit": "\n".join([*(p.get("value") for p in junit.iter("property") if p.get("name") == "sandbox"),
                            *(f.text or "" for f in junit.iter("failure"))]),
        "html": visible_text(out["html"].read_text(encoding="utf-8")),
    }
    assert "正弦位置编码" in texts["json"] and "未开始" in texts["gradescope"] and 'lang="zh-CN"' in \
        out["html"].read_text(encoding="utf-8")
    kept = _kept_in_course_texts() | NAMES
    for fmt, text in texts.items():
        assert [w for w in english_prose(text) if w not in kept] == [], (fmt, text)


def test_the_language_changes_no_score(tmp_path):
    zh_stubs = tmp_path / "zh"
    zh_stubs.mkdir()
    for name in STUB_FILES:  # the Chinese stubs where there is one, the English elsewhere
        source = ZH_STUBS / name if (ZH_STUBS / name).is_file() else ROOT / "exercises" / name
        (zh_stubs / name).write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    components = ["masking", "sinusoidal_encoding", "patch_embedding"]
    scores = {}
    for target in ("solutions", "exercises", str(zh_stubs)):
        for lang in ("en", "zh"):
            report = json.loads(grader("--lang", lang, "check", *components, "--json", "--target", target).stdout)
            scores[target, lang] = [(c["id"], c["score"], c["status"]) for c in report["components"]]
        assert scores[target, "en"] == scores[target, "zh"]
    assert scores["exercises", "en"] == scores[str(zh_stubs), "en"]
    assert scores["solutions", "en"] == [(c, load_course().component(c).points, "passed") for c in components]


# --------------------------------------------------------------------------- the Chinese stubs


def _docstring_owners(source: str) -> list[str]:
    """The qualified names of the module, classes and functions that have a docstring, in order."""
    owners = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                if ast.get_docstring(child) is not None:
                    owners.append(name)
                visit(child, name + ".")

    tree = ast.parse(source)
    if ast.get_docstring(tree) is not None:
        owners.append("<module>")
    visit(tree, "")
    return owners


def _worded_todos(source: str) -> list[str]:
    return [m["tag"] for line in source.splitlines() if (m := WORDED_TODO.match(line))]


TRANSLATED = sorted(p.name for p in ZH_STUBS.glob("*.py"))


def test_every_stub_is_translated():
    assert set(TRANSLATED) == set(STUB_FILES)


@pytest.mark.parametrize("name", TRANSLATED)
def test_a_chinese_stub_holds_the_english_code(name):
    english = (ROOT / "exercises" / name).read_text(encoding="utf-8")
    chinese = (ZH_STUBS / name).read_text(encoding="utf-8")
    assert code_without_docstrings(chinese) == code_without_docstrings(english), \
        f"{name}: the code differs from exercises/{name} (only docstrings and comments may)"
    assert _docstring_owners(chinese) == _docstring_owners(english)
    assert _worded_todos(chinese) == _worded_todos(english)  # an interview drill hides the same steps
    tree = ast.parse(chinese)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            assert doc is None or CJK.search(doc), f"{name}: an English docstring in {getattr(node, 'name', name)}"


def test_a_chinese_release_ships_chinese_stubs_with_the_same_code(tmp_path):
    result = grader("release", str(tmp_path / "bundle"), "--lang", "zh")
    assert result.returncode == 0, result.stderr
    bundle = tmp_path / "bundle"
    assert "学生发布包已写入" in result.stdout
    for name in STUB_FILES:
        shipped = (bundle / "exercises" / name).read_text(encoding="utf-8")
        english = (ROOT / "exercises" / name).read_text(encoding="utf-8")
        assert code_without_docstrings(shipped) == code_without_docstrings(english)
        if name in TRANSLATED:
            assert CJK.search(ast.get_docstring(ast.parse(shipped)) or ""), name
    assert (bundle / "grader" / "stubs" / "attention.py").read_text() == (ROOT / "exercises" / "attention.py").read_text()
    readme = (bundle / "README.md").read_text(encoding="utf-8")
    assert "按教学顺序" in readme
    prose = re.sub(r"^```.*?^```", " ", readme, flags=re.S | re.M)  # commands to type
    assert [w for w in english_prose(prose) if w not in NAMES | _kept_in_course_texts()] == [], prose


def test_a_chinese_nbgrader_course_holds_no_english_prose_in_what_the_grader_writes(tmp_path):
    """The notebooks' cells that the grader writes: the introduction, the setup cell, the cells of files not in
    the assignment, the "check your work" part (a heading and a grading cell per component), the code outside
    the solutions. The stubs' docstrings (the cells headed by a file or a name) are the translated stubs, whose
    own test is above; they cite papers and models by their English names."""
    pytest.importorskip("nbformat")
    result = grader("--lang", "zh", "nbgrader", str(tmp_path / "course"))
    assert result.returncode == 0, result.stderr
    assert english_prose(result.stdout) == [], result.stdout
    kept = NAMES | _kept_in_course_texts()
    notebooks = sorted((tmp_path / "course" / "source").glob("*/*.ipynb"))
    assert notebooks
    for path in notebooks:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        setup = cells[1]
        assert setup["metadata"]["nbgrader"]["grade_id"] == "setup" and 'set_language("zh")' in "".join(setup["source"])
        for cell in cells:
            source = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                if source.startswith(("## `", "### `")):
                    continue  # a stub's docstring
                text = source
            else:
                code = re.sub(r"### BEGIN SOLUTION.*?### END SOLUTION", " ", source, flags=re.S)
                code = re.sub(r'NotImplementedError\("[^"]*"\)', " ", code)  # the stubs' code, the same in English
                words = [s for s in re.findall(r'"((?:[^"\\]|\\.)*)"', code) if " " in s]  # a message, not a path
                text = "\n".join(re.findall(r"#(.*)", code) + words)
            assert [w for w in english_prose(text) if w not in kept] == [], (path.name, source[:300])


def test_a_stale_translation_is_not_used(tmp_path, monkeypatch):
    from grader import pristine

    folder = tmp_path / "stubs"
    folder.mkdir()
    (folder / "block.py").write_text('"""中文。"""\nx = 1\n', encoding="utf-8")
    monkeypatch.setattr(pristine, "translated_stubs_dir", lambda lang: folder)
    warned = []
    stubs = {"block.py": '"""English."""\nx = 2\n', "vit.py": '"""English."""\n'}
    assert pristine.translate_stubs(stubs, "zh", warned.append) == stubs
    assert "out of date" in warned[0]


# --------------------------------------------------------------------------- the checks' diagnoses and hints

@pytest.mark.parametrize("bug_id", ["masking:fill_with_zero", "masking:fill_with_minus_1e4", "kv_cache:len_is_batch_size"])
def test_a_chinese_check_names_the_mistake_in_chinese(tmp_path, bug_id):
    """A diagnosis (a plain sentence, a filled-in template, or a 'more than one' line) and the hint come in
    Chinese; the English run keeps its English; the score is the same."""
    from selftests.bugs import all_bugs, materialize

    bug = next(b for b in all_bugs() if b.id == bug_id)
    folder = materialize(bug, tmp_path / "impl")
    runs = {lang: grader("--lang", lang, "check", bug.component, "--target", str(folder)) for lang in ("en", "zh")}
    english = [line for line in runs["en"].stdout.splitlines() if line.strip().startswith(("diagnosis:", "hint:"))]
    chinese = [line for line in runs["zh"].stdout.splitlines() if line.strip().startswith(("诊断：", "提示："))]
    assert english and len(chinese) == len(english), runs["zh"].stdout
    assert all(re.search(r"[\u4e00-\u9fff]", line.split("：", 1)[1]) for line in chinese), chinese
    for line in english:  # none of the English sentences is left in the Chinese run
        assert line.split(": ", 1)[1] not in runs["zh"].stdout
    totals = {lang: [line for line in run.stdout.splitlines() if bug.component in line][0].split()[1]
              for lang, run in runs.items()}
    assert totals["en"] == totals["zh"]


def test_a_chinese_notebooks_grading_cell_holds_no_english_prose(tmp_path, capsys):
    """What grade_component prints in a Chinese course's kernel (its setup cell sets the language), the checks'
    messages of a not-started component included."""
    import shutil

    from grader.channels.nbgrader import notebook

    folder = tmp_path / "submission"
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "exercises" / "swin.py", folder / "swin.py")
    i18n.set_language("zh")
    try:
        assert notebook.grade_component("masking", folder=folder) == load_course().component("masking").points
        assert notebook.grade_component("swin_windows", folder=folder, hidden=False) == 0
        report = notebook.grade_folder(folder)
    finally:
        i18n.set_language(None)
    printed = capsys.readouterr().out
    assert "masking：12.00 分，满分 12（通过）" in printed and "未开始" in printed
    assert english_prose(printed) == [], printed


# One catalogued bug for each check that some bug of the catalogue fails (a greedy cover, from the catalogue
# graded in English; test_the_chinese_sample_covers_every_failing_check_... below keeps it one).
CHINESE_SAMPLE = (
    "bpe_encoding:no_id_check", "bpe_encoding:no_special_check", "bpe_encoding:str_split", "bpe_encoding:strict_decode",
    "bpe_training:count_not_weighted", "bpe_training:no_check_for_specials",
    "dpo_loss:beta_missing", "dpo_loss:half_shape_check", "dpo_loss:log_of_sigmoid", "dpo_loss:masked_mean",
    "dpo_loss:labels_zeroed_in_place", "dpo_loss:no_label_shape_check", "dpo_loss:rewards_not_detached",
    "grpo_loss:eps_missing", "grpo_loss:normalised_in_place",
    "grpo_loss:group_size_one_allowed", "grpo_loss:k1_kl", "grpo_loss:max_not_min", "grpo_loss:ratio_detached",
    "cross_entropy:log_softmax_max_added_back", "cross_entropy:logsumexp_method", "cross_entropy:no_shape_check",
    "cross_entropy:softmax_max_without_keepdim", "grouped_query_attention:full_width_kv",
    "grouped_query_attention:repeat_along_sequence", "head_splitting:head_count_as_width",
    "head_splitting:merge_interleaved", "head_splitting:no_divisibility_check",
    "head_splitting:resizes_input_in_place", "kv_cache:appends_twice", "kv_cache:cache_forgets",
    "kv_cache:len_of_empty_cache", "kv_cache:mask_with_cache_accepted", "layer_norm:library_layer_norm",
    "layer_norm:plain_tensor_parameters", "lr_schedule:accepts_total_equal_warmup",
    "lr_schedule:cosine_without_one", "lr_schedule:nanogpt_warmup", "lr_schedule:zero_after_total",
    "masking:fill_with_minus_1e4", "masking:float_mask", "masking:library_causal_mask", "masking:mask_none_crashes",
    "masking:masked_fill_in_place", "masking:no_k_len_check", "multi_head_attention:keys_and_queries_swapped",
    "multi_head_attention:library_attention", "multi_head_attention:returns_weights_first",
    "optimizer:adam_l2_decay", "optimizer:clip_per_parameter", "optimizer:no_value_checks",
    "patch_embedding:assumes_square_images", "patch_embedding:no_divisibility_check",
    "patch_embedding:num_patches_precedence", "patch_embedding:proj_input_size", "pre_ln_block:dropout_always_on",
    "pre_ln_block:library_encoder_layer", "pre_ln_block:residual_in_place",
    "pre_ln_block:squeezes_the_batch", "qkv_projection:bias_flag_ignored",
    "qkv_projection:d_k_true_division", "qkv_projection:no_divisibility_check", "rms_norm:eps_added_to_output",
    "rms_norm:library_rms_norm", "rms_norm:mean_square_without_keepdim", "rms_norm:weight_starts_at_zeros", "rope:complex_table",
    "rope:negative_positions_wrap", "rope:rotated_in_place", "sampling:greedy_argmax_dim0",
    "sampling:kth_without_keepdim", "sampling:max_len_one_past", "sampling:returns_new_tokens_only",
    "sampling:temperature_multiplied", "scaling:k_dot_T", "sinusoidal_encoding:batch_dimension_added",
    "sinusoidal_encoding:no_odd_d_model_check", "sinusoidal_encoding:no_positivity_check",
    "swiglu:w_down_transposed", "swin_windows:official_float_mask", "swin_windows:reverse_grid_column_major",
    "swin_windows:partition_view_after_permute", "swin_windows:check_and_not_or", "swin_windows:shift_ws_allowed", "swin_windows:view_without_permute", "tiny_lm:attn_residual_from_normed", "tiny_lm:residual_in_place", "tiny_lm:head_with_bias",
    "tiny_lm:rope_head_dim_d_model", "tiny_lm:shared_cache_object", "vit_classifier:cls_token_2d",
    "window_attention:index_axes_swapped", "window_attention:index_stride_2ws", "window_attention:mask_interleaved",
    "window_attention:mlp_ratio_ignored", "window_attention:mlp_without_norm2",
)


def _failing_messages(report: dict) -> dict[tuple[str, str], str]:
    return {(check["component"], check["name"]): check["message"] for component in report["components"]
            for check in component["checks"] if check["status"] != "passed" and check["message"]}


def test_failing_checks_graded_in_chinese_hold_no_english_prose(tmp_path):
    """Every part of a failing check's message in Chinese: the call it describes, what went wrong, the
    diagnosis and the hint (code, numbers and the quoted text of an error raised by the code aside)."""
    from selftests.bugs import all_bugs, materialize
    from selftests.conftest import grade_folders

    bugs = {bug.id: bug for bug in all_bugs()}
    graded = {bug_id: f"{materialize(bugs[bug_id], tmp_path / bug_id.replace(':', '__'))}::{bugs[bug_id].component}"
              for bug_id in CHINESE_SAMPLE}  # a bug fails its own component only
    reports = grade_folders(list(graded.values()), tmp_path, env={"LC_ALL": "zh_CN.UTF-8"})
    prose = {}
    for bug_id, graded_as in graded.items():
        failing = _failing_messages(reports[graded_as])
        assert failing, f"{bug_id} fails no check"
        for check, message in failing.items():
            assert CJK.search(message), (bug_id, check, message)
            if english_prose(message):
                prose[bug_id, check] = (english_prose(message), message)
    assert prose == {}


@pytest.mark.timeout(1800)  # `graded` grades the whole catalogue where this test is the first to ask for it
def test_the_chinese_sample_covers_every_failing_check_and_the_catalogue_reads_in_chinese(graded):
    """The sample above fails every check that some bug fails; and every failing message of the whole
    catalogue (the `graded` reports, in English) translated as a Chinese run shows it holds no English prose."""
    from grader.check_text import render
    from grader.engine.scoring import diagnosed_message
    from grader.results import CaseResult

    bugs = {label.removeprefix("bug:"): report for label, report in graded.items() if label.startswith("bug:")}
    failing = {check for report in bugs.values() for check in _failing_messages(report)}
    covered = {check for bug_id in CHINESE_SAMPLE for check in _failing_messages(bugs[bug_id])}
    assert failing - covered == set(), "add a bug that fails these checks to CHINESE_SAMPLE"
    # each failing message as the grader scores it: its case's text as data, and the known mistakes named by id
    messages = {json.dumps([check["text"], check["diagnosis"]]) for report in bugs.values()
                for component in report["components"] for check in component["checks"]
                if check["status"] != "passed" and check["message"]}
    prose = {}
    for message in messages:
        text, named = json.loads(message)
        shown = diagnosed_message(CaseResult("", "", "", "failed", render(text, "en"), text=text), named, "zh")
        if english_prose(shown):
            prose[shown] = english_prose(shown)
    assert prose == {}, f"{len(prose)} of {len(messages)} messages, e.g. {next(iter(prose.items()), None)}"
