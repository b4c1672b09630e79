"""`python -m grader show` and the HTML page: what the figures hold, not only that a file was written.

The figures' data (grader/show/data.py) are checked as arrays: the reference's
causal mask is blank strictly above its (shifted) diagonal, a swapped sin/cos
shows in the encoding's first column, the stubs give figures with only the
expected panels and say "not started". The page is opened in a real headless
browser where one is installed (Debian's chromium).
"""
from __future__ import annotations

import base64
import html
import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from grader.figures import FIGURES, figure_file, see_line
from grader.results import CheckResult, ComponentResult, Report
from selftests.bugs import ROOT, all_bugs, materialize

PNG = b"\x89PNG\r\n\x1a\n"
CJK = re.compile(r"[\u4e00-\u9fff]")


def bug_folder(bug_id: str, dest: Path) -> Path:
    return materialize(next(b for b in all_bugs() if b.id == bug_id), dest)


@pytest.fixture(scope="module")
def reference_figures():
    from grader.show.pictures import learner_figures

    return learner_figures(ROOT / "solutions", list(FIGURES))


@pytest.fixture(scope="module")
def stub_figures():
    from grader.show.pictures import learner_figures

    return learner_figures(ROOT / "exercises", list(FIGURES))


def panels(figures, component: str, name: str):
    figure = next(f for f in figures[component] if f.name == name)
    return figure, figure.expected, figure.yours


def test_every_figure_has_a_maker_and_names_real_checks():
    from grader.course import load_course
    from grader.show.data import BUILDERS

    assert set(BUILDERS) == {name for names in FIGURES.values() for name in names}
    course = load_course()
    for component, pictures in FIGURES.items():
        for name, picture in pictures.items():
            assert picture.checks and set(picture.checks) <= set(course.component(component).checks), name


# a bug per figure that the figure shows: the learner's panels differ from the expected ones
SHOWN = [("masking:ignores_k_len_offset", "causal_mask"), ("masking:fill_with_minus_1e4", "causal_mask"),
         ("head_splitting:split_heads_interleaved", "head_split"),
         ("multi_head_attention:missing_out_proj", "attention_heads"),
         ("multi_head_attention:mask_multiplied_after_softmax", "sdpa_weights"),
         ("sinusoidal_encoding:positions_from_one", "sinusoidal_encoding"),
         ("patch_embedding:channels_last_in_patch", "patch_order"), ("kv_cache:len_is_batch_size", "kv_cache_growth"),
         ("rope:rotate_half_layout", "rope_rotation"), ("rope:base_ignored", "rope_rotation"),
         ("grouped_query_attention:tiled_groups", "gqa_heads"), ("swin_windows:tokens_column_major", "swin_windows"),
         ("swin_windows:slices_off_by_one", "swin_mask")]


def test_each_figure_shows_a_bug_of_its_component(tmp_path):
    from grader.show.pictures import learner_figures

    assert {name for _, name in SHOWN} == {name for names in FIGURES.values() for name in names}
    for i, (bug_id, name) in enumerate(SHOWN):
        component = bug_id.split(":")[0]
        figures = learner_figures(bug_folder(bug_id, tmp_path / str(i)), {component: [name]})[component]
        assert [f.name for f in figures] == [name]
        assert figures[0].matches is False, (bug_id, name, figures[0].why)


def test_the_reference_matches_every_expected_figure(reference_figures):
    assert set(reference_figures) == set(FIGURES)
    for component, figures in reference_figures.items():
        for figure in figures:
            assert figure.yours is not None, (component, figure.name, figure.why)
            assert figure.matches, (component, figure.name)


def test_the_mask_figure_of_a_correct_causal_mask_is_blank_strictly_above_the_diagonal(reference_figures):
    _, expected, yours = panels(reference_figures, "masking", "causal_mask")
    for rows in (expected, yours):
        square, offset, weights = (p.values for p in rows)
        assert square.dtype == bool and square.shape == (5, 5)
        assert not square[np.triu_indices(5, k=1)].any()  # strictly upper triangle: masked (blank)
        assert square[np.tril_indices(5)].all()
        q_len, k_len = offset.shape
        assert (q_len, k_len) == (3, 6)
        assert not offset[np.triu_indices(q_len, k=k_len - q_len + 1, m=k_len)].any()  # above the shifted diagonal
        assert offset[np.tril_indices(q_len, k=k_len - q_len, m=k_len)].all()
        assert np.allclose(weights[np.triu_indices(q_len, k=k_len - q_len + 1, m=k_len)], 0)
        assert np.allclose(weights.sum(-1), 1)


def test_a_swapped_sin_cos_shows_in_the_encodings_first_column(tmp_path):
    from grader.show.pictures import learner_figures

    folder = bug_folder("sinusoidal_encoding:sin_cos_swapped", tmp_path / "impl")
    figure, expected, yours = panels(learner_figures(folder, ["sinusoidal_encoding"]), "sinusoidal_encoding",
                                     "sinusoidal_encoding")
    assert figure.matches is False
    first, want = yours[0].values[:, 0], expected[0].values[:, 0]
    positions = np.arange(len(first))
    assert np.allclose(want, np.sin(positions), atol=1e-5)  # column 0 is sin(p): 0 at position 0
    assert np.allclose(first, np.cos(positions), atol=1e-5)  # the bug: cos(p), 1 at position 0
    mine, right = yours[0].values, expected[0].values
    assert np.allclose(mine[:, 0::2], right[:, 1::2], atol=1e-5) and np.allclose(mine[:, 1::2], right[:, 0::2], atol=1e-5)


def test_a_copy_without_stand_ins_draws_the_expected_panels_it_stored(tmp_path, monkeypatch):
    """A student release has no stand-ins (they are answers): `release` stores the expected panels instead."""
    from grader.show import data

    path = tmp_path / "expected.npz"
    data.save_expected(path)
    fresh = {name: data.expected_panels(name) for name in data.BUILDERS}
    monkeypatch.setattr(data, "STORED", path)
    monkeypatch.setattr(data.standins, "shipped", lambda piece: False)
    data._stored.cache_clear()
    try:
        with pytest.raises(data.NoReference):
            data.BUILDERS["causal_mask"][1]()
        for name, panels in fresh.items():
            stored = data.expected_panels(name)
            assert [(p.title, p.kind, p.xlabel, p.ylabel, p.scale) for p in stored] == \
                [(p.title, p.kind, p.xlabel, p.ylabel, p.scale) for p in panels], name
            assert all(a.same_as(b) and (a.labels is None) == (b.labels is None) for a, b in zip(stored, panels))
            assert all(a.labels is None or (a.labels == b.labels).all() for a, b in zip(stored, panels))
    finally:
        data._stored.cache_clear()


def test_the_stubs_give_not_started_figures_with_the_expected_panels_only(stub_figures):
    assert set(stub_figures) == set(FIGURES)
    for component, figures in stub_figures.items():
        for figure in figures:
            assert figure.yours is None and figure.matches is None, (component, figure.name)
            assert figure.why.startswith("not started"), (component, figure.name, figure.why)
            assert figure.expected and all(p.values.size for p in figure.expected)


def test_a_figure_is_drawn_as_a_png_of_its_panels(stub_figures, reference_figures):
    from matplotlib.image import imread

    from grader.show.draw import png

    for figures in (stub_figures, reference_figures):
        data = png(figures["masking"][0])
        assert data.startswith(PNG)
        height, width, _ = imread(io.BytesIO(data)).shape
        assert width > 300 and height > 300


def test_show_writes_the_figures_and_names_those_that_exist(tmp_path):
    result = subprocess.run([sys.executable, "-m", "grader", "show", "swin_windows", "--target",
                             str(ROOT / "solutions"), "--out", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    for name in FIGURES["swin_windows"]:
        path = tmp_path / figure_file("swin_windows", name)
        assert path.read_bytes().startswith(PNG)
        assert f"{path}: yours matches the expected" in result.stdout
    none = subprocess.run([sys.executable, "-m", "grader", "show", "scaling"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert none.returncode == 2
    assert "scaling has no figure" in none.stderr and all(c in none.stderr for c in FIGURES)
    missing = subprocess.run([sys.executable, "-m", "grader", "show", "masking", "--target", str(tmp_path / "none")],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and f"no such folder: {tmp_path / 'none'}" in missing.stderr


def test_a_failing_core_check_names_the_figure_and_other_failures_do_not(tmp_path):
    from grader.engine.runner import run_checks

    swapped = run_checks(bug_folder("sinusoidal_encoding:sin_cos_swapped", tmp_path / "swapped"),
                         ["sinusoidal_encoding"], processes=1).components[0]
    assert swapped.status == "failed" and swapped.figures == list(FIGURES["sinusoidal_encoding"])
    assert swapped.message.endswith(see_line("sinusoidal_encoding", swapped.figures))
    no_check = run_checks(bug_folder("sinusoidal_encoding:no_odd_d_model_check", tmp_path / "no_check"),
                          ["sinusoidal_encoding"], processes=1).components[0]
    assert no_check.status == "failed" and not no_check.figures  # a ValueError not raised: no picture shows it
    assert "grader show" not in no_check.message


def test_check_and_the_text_formats_do_not_import_matplotlib(tmp_path):
    code = ("import os, sys\n"
            "from grader.cli import main\n"
            f"main(['check', 'masking', '--target', {str(ROOT / 'solutions')!r}])\n"
            f"main(['grade', {str(ROOT / 'solutions')!r}, '--results', {str(tmp_path / 'r.json')!r}, "
            f"'--also', 'markdown={tmp_path / 'r.md'}', '--also', 'junit={tmp_path / 'r.xml'}'])\n"
            "heavy = [m for m in ('matplotlib', 'jinja2', 'grader.show.draw') if m in sys.modules]\n"
            "sys.modules['grader.sandbox.reaper'].shutdown()\n"
            "print('heavy:', heavy)\n"
            "sys.stdout.flush()\n"
            "os._exit(0)\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "heavy: []" in result.stdout, result.stdout[-500:]


def hand_made_report(target: str) -> Report:
    hostile = "expected 0, got <script>alert(1)</script> & more\n  hint: keep <b>this</b> as text"
    checks = [CheckResult("test_even_columns_are_sines", "sinusoidal_encoding", "failed", 0, 5, 0, 2, hostile),
              CheckResult("test_shape_and_dtype", "sinusoidal_encoding", "passed", 5, 5, 2, 2)]
    return Report(target, [
        ComponentResult("sinusoidal_encoding", "Sinusoidal positional encoding", "failed", 5, 10, checks,
                        f"test_even_columns_are_sines: {hostile}\n"
                        f"{see_line('sinusoidal_encoding', list(FIGURES['sinusoidal_encoding']))}",
                        "sin in even columns", list(FIGURES["sinusoidal_encoding"])),
        ComponentResult("scaling", "Scaled dot-product scores", "passed", 8, 8,
                        [CheckResult("test_attention_scores_values", "scaling", "passed", 8, 8, 1, 1)]),
    ], 1.5, "namespaces")


def test_the_html_page_holds_the_table_every_message_and_the_failing_figures(tmp_path):
    from grader.channels.render.formats import to_html

    folder = bug_folder("sinusoidal_encoding:sin_cos_swapped", tmp_path / "impl")
    page = to_html(hand_made_report(str(folder)))
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in page  # escaped
    assert page.count("&lt;b&gt;this&lt;/b&gt;") == 2  # the component's message and its check's, in full
    assert re.search(r"<td><a href=\"#scaling\"><code>scaling</code></a></td>", page)
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == len(FIGURES["sinusoidal_encoding"])  # only the failing component's
    assert base64.b64decode(images[0]).startswith(PNG)
    assert "Yours differs from the expected" in page
    assert "http://" not in page and "https://" not in page and "<link" not in page  # self-contained
    assert len(re.findall(r"data:image/png", to_html(hand_made_report(str(folder)), "none"))) == 0


def browser() -> str | None:
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome", "chrome"))), None)


def test_grading_and_drawing_leave_the_callers_memory_limit_as_it_was(tmp_path):
    """A notebook kernel grades and draws in its own process: the grader's cap on its own address space lasts
    while it grades (a browser started after it with the cap inherited died of SIGTRAP)."""
    import resource

    from grader.channels.render.formats import to_html
    from grader.engine.runner import run_checks

    before = resource.getrlimit(resource.RLIMIT_AS)
    report = run_checks(bug_folder("sinusoidal_encoding:sin_cos_swapped", tmp_path / "swapped"),
                        ["sinusoidal_encoding"], processes=1)
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    assert "data:image/png;base64," in to_html(report)
    assert resource.getrlimit(resource.RLIMIT_AS) == before


@pytest.mark.skipif(browser() is None, reason="no headless browser here (apt-get install chromium)")
def test_the_html_page_renders_in_a_headless_browser(tmp_path):
    from matplotlib.image import imread

    from grader.channels.render.formats import to_html

    folder = bug_folder("sinusoidal_encoding:sin_cos_swapped", tmp_path / "impl")
    page = tmp_path / "report.html"
    page.write_text(to_html(hand_made_report(str(folder))), encoding="utf-8")
    # --disable-dev-shm-usage: Debian's launcher adds it only when its own probe of /dev/shm works, and in CI's
    # container that probe fails, so Chromium's shared memory ran out and it died of SIGTRAP
    flags = [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--disable-extensions", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<table>" in dom.stdout and "sinusoidal_encoding" in dom.stdout and "data:image/png;base64," in dom.stdout
    assert "<script>alert(1)" not in dom.stdout
    shot = tmp_path / "shot.png"
    done = subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1000,1400", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    pixels = imread(shot)
    assert pixels.std() > 0.05  # drawn: not a blank page
    assert (pixels[..., :3].max(-1) - pixels[..., :3].min(-1)).max() > 0.3  # the coloured badges and figure


def test_a_notebook_kernel_shows_the_figures_of_a_failing_component(tmp_path):
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    from grader.channels.nbgrader.notebook import show_figures

    folder = bug_folder("sinusoidal_encoding:sin_cos_swapped", tmp_path / "impl")
    InteractiveShell.instance()
    try:
        with capture_output() as captured:
            shown = show_figures("sinusoidal_encoding", folder)
    finally:
        InteractiveShell.clear_instance()
    assert shown == len(FIGURES["sinusoidal_encoding"]), captured.stdout
    assert base64.b64decode(captured.outputs[0].data["image/png"]).startswith(PNG)


def test_the_readme_lists_the_components_with_figures():
    readme = (ROOT / "README.md").read_text().split("| component | what the figure shows |", 1)[1].split("\n\n", 1)[0]
    assert re.findall(r"^   \| `(\w+)` \|", readme, re.MULTILINE) == list(FIGURES)


# --------------------------------------------------------------------------- in Chinese

@pytest.fixture
def chinese():
    from grader import i18n

    i18n.set_language("zh")
    try:
        yield
    finally:
        i18n.set_language(None)


def _texts(canvas) -> list[str]:
    """Every text a matplotlib figure holds: its title, and each panel's title, axis labels and words."""
    from matplotlib.text import Text

    return [t.get_text() for t in canvas.findobj(Text) if t.get_text()]


def test_a_chinese_figure_has_chinese_words_and_every_glyph(chinese, reference_figures):
    """The title, panel titles and labels come from the catalogue, drawn with a CJK font that has their glyphs
    (a missing glyph is a warning, an error under this suite's filterwarnings); without such a font the figure
    keeps to English and `show` says why."""
    from grader.show import draw
    from selftests.test_i18n import english_prose

    if draw.cjk_font() is None:
        assert "fonts-noto-cjk" in draw.font_note()
        texts = _texts(draw.canvas(reference_figures["masking"][0]))
        assert "expected: causal_mask(5)" in texts and not any(CJK.search(t) for t in texts)
        pytest.skip("no font with CJK glyphs here (apt-get install fonts-wqy-microhei): the figures keep to English")
    assert draw.font_note() == ""
    from grader.show.pictures import learner_figures

    stub = learner_figures(ROOT / "exercises", ["masking"])["masking"][0]  # made in Chinese: its reason too
    assert stub.why.startswith("not started") and stub.why_text().startswith("未开始")
    for figure in (reference_figures["masking"][0], reference_figures["head_splitting"][0], stub):
        canvas = draw.canvas(figure)
        title = canvas.get_suptitle()
        assert title.startswith(f"{figure.component}: {figure.name}\n")
        assert CJK.search(title) and figure.caption not in title.replace("\n", " ")
        assert english_prose("\n".join(_texts(canvas))) == [], _texts(canvas)
        assert draw.png(figure).startswith(PNG)
    texts = _texts(draw.canvas(reference_figures["masking"][0]))
    assert "期望：causal_mask(5)" in texts and "键 j" in texts and "查询 i" in texts
    assert "你的：头 0" in _texts(draw.canvas(reference_figures["multi_head_attention"][0]))


def test_without_a_cjk_font_a_chinese_figure_keeps_to_english(chinese, monkeypatch, reference_figures):
    from grader.show import draw

    monkeypatch.setattr(draw, "cjk_font", lambda: None)
    texts = _texts(draw.canvas(reference_figures["masking"][0]))
    assert "expected: causal_mask(5)" in texts and "key j" in texts and not any(CJK.search(t) for t in texts)
    assert draw.png(reference_figures["masking"][0]).startswith(PNG)  # no glyph missing: no warning, no error
    assert "fonts-noto-cjk" in draw.font_note() and CJK.search(draw.font_note())
    from grader.channels.render.formats import to_html

    page = to_html(chinese_report(str(ROOT / "solutions")))
    assert page.count(html.escape(draw.font_note())) == len(FIGURES["sinusoidal_encoding"])  # the page says why


def test_wrapping_breaks_between_cjk_characters():
    from grader.show.draw import wrap

    text = "causal_mask(q_len) 与 causal_mask(q_len, k_len)（深色：可以关注，空白：被掩码），以及权重"
    lines = wrap(text, 30)
    assert all(len(line) <= 30 for line in lines) and len(lines) > 2
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")  # nothing lost, broken between characters
    assert wrap("one two three", 8) == ["one two", "three"]


def test_a_chinese_show_lists_its_figures_in_chinese(tmp_path):
    from selftests.test_i18n import english_prose

    result = subprocess.run([sys.executable, "-m", "grader", "--lang", "zh", "show", "swin_windows", "--target",
                             str(ROOT / "solutions"), "--out", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("你的与期望结果一致") == len(FIGURES["swin_windows"])
    assert "window_partition：" in result.stdout  # the caption
    assert english_prose(result.stdout + result.stderr) == [], result.stdout


def chinese_report(target: str) -> Report:
    """A report as a Chinese grading leaves it: course.yml's English title and hint (translated where shown),
    messages already in Chinese."""
    from grader.course import load_course

    course = load_course().component("sinusoidal_encoding")
    message = "偶数列应为正弦\n" + see_line("sinusoidal_encoding", list(FIGURES["sinusoidal_encoding"]))
    checks = [CheckResult("test_even_columns_are_sines", "sinusoidal_encoding", "failed", 0, 5, 0, 2, message),
              CheckResult("test_shape_and_dtype", "sinusoidal_encoding", "passed", 5, 5, 2, 2)]
    return Report(target, [
        ComponentResult("sinusoidal_encoding", course.title, "failed", 5, 10, checks,
                        f"test_even_columns_are_sines: {message}", course.hint, list(FIGURES["sinusoidal_encoding"])),
        ComponentResult("masking", load_course().component("masking").title, "not started", 0, 12, []),
    ], 1.5, "namespaces")


def test_a_chinese_html_page_holds_no_english_prose(chinese, tmp_path):
    from grader.channels.render.formats import to_html
    from selftests.test_i18n import english_prose, visible_text

    page = to_html(chinese_report(str(bug_folder("sinusoidal_encoding:sin_cos_swapped", tmp_path / "impl"))))
    assert '<html lang="zh-CN">' in page
    text = visible_text(page)
    assert "正弦位置编码" in text and "你的与期望结果不同。" in text and "个检查项" in text
    assert english_prose(text) == [], text
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == len(FIGURES["sinusoidal_encoding"])
