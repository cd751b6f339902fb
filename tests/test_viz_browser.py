"""ppir viz pages in a real browser: headless Chromium driven by Playwright (Python).

Chromium is the system one (Debian's ``chromium`` package, or ``PPIR_CHROMIUM``), never a
Playwright download.  The tests skip, saying why, only where Playwright or Chromium is missing
or Chromium cannot start; everything else is a failure.
"""

from __future__ import annotations

import io
import os
import shutil
import time

import pytest

from ppir.cli import main

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
MEMCOLOR = (106, 61, 154)  # draw.js MEMCOLOR: the memory curve


def _chromium() -> str | None:
    for c in (os.environ.get("PPIR_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if c and shutil.which(c):
            return shutil.which(c)
    return None


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright for Python is not installed (pip install playwright)")
    exe = _chromium()
    if exe is None:
        pytest.skip("no Chromium found (apt-get install chromium, or set PPIR_CHROMIUM)")
    pw = sync_playwright().start()
    try:
        b = pw.chromium.launch(executable_path=exe, args=FLAGS, timeout=30_000)
    except Exception as e:  # noqa: BLE001 - any launch failure means "no usable browser here"
        pw.stop()
        pytest.skip(f"Chromium at {exe} cannot be launched: {str(e).splitlines()[0]}")
    yield b
    b.close()
    pw.stop()


def page_for(browser, path, errors):
    page = browser.new_page(viewport={"width": 1300, "height": 850})
    page.on(
        "console",
        lambda m: (
            errors.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None
        ),
    )
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.goto(path.as_uri())
    page.wait_for_function("window.ppirViz !== undefined", timeout=15_000)
    return page


def viz(tmp_path, name, *argv):
    out = tmp_path / name
    assert main(["viz", *argv, "-o", str(out)]) == 0
    return out


def count_color(page, rgb, tol=12) -> int:
    return page.evaluate(
        """([r, g, b, tol]) => {
      const c = document.getElementById("main"), copy = document.createElement("canvas");
      copy.width = c.width; copy.height = c.height;
      const cx = copy.getContext("2d", { willReadFrequently: true });
      cx.drawImage(c, 0, 0);
      const d = cx.getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4)
        if (Math.abs(d[i] - r) <= tol && Math.abs(d[i + 1] - g) <= tol &&
            Math.abs(d[i + 2] - b) <= tol) n++;
      return n; }""",
        [*rgb, tol],
    )


def test_page_loads_plays_and_shows_a_rank_memory_curve(browser, tmp_path):
    pytest.importorskip("PIL")
    from PIL import Image

    path = viz(
        tmp_path,
        "cmp.html",
        "1f1b",
        "-D",
        "P=4",
        "-D",
        "M=8",
        "--compare",
        "interleaved_1f1b",
        "-D2",
        "v=2",
    )
    errors: list[str] = []
    page = page_for(browser, path, errors)
    assert "1f1b(P=4, M=8)" in page.inner_text("#hdr") and "bubble/total" in page.inner_text("#hdr")
    assert page.evaluate("ppirViz.state.t") == 0
    page.click("#play")
    page.wait_for_function("ppirViz.state.t > 0.5", timeout=10_000)
    page.click("#play")  # pause
    t = page.evaluate("ppirViz.state.t")
    assert page.evaluate("ppirViz.state.playing") is False and t > 0.5
    assert page.get_attribute("body", "data-mode") == "dynamic"
    assert page.inner_text("#clock").startswith("t = ")
    assert "running now" in page.inner_text("#side")

    shot = Image.open(io.BytesIO(page.screenshot())).convert("RGB")
    colors = shot.getcolors(maxcolors=1 << 20)
    assert len(colors) > 50, "screenshot is (nearly) blank"
    assert max(c for c, _ in colors) < 0.95 * shot.width * shot.height

    page.select_option("#rank", "1")
    page.click("#view-local")
    assert page.get_attribute("body", "data-view") == "local"
    assert page.evaluate("ppirViz.state.drawn.memPoints") == 16 + 32  # both runs' rank-1 ops
    page.click("#mode-static")
    assert count_color(page, MEMCOLOR, tol=40) > 400, "no memory curve drawn"
    side = page.inner_text("#side")
    assert "16 ops" in side and "32 ops" in side and "peak 3 A" in side
    page.evaluate(f"ppirViz.seek({t})")
    page.click("#step-fwd")
    assert page.evaluate("ppirViz.state.t") > t
    assert page.get_attribute("body", "data-mode") == "dynamic"
    assert "activations held" in page.inner_text("#side")
    assert not errors, errors


def test_hover_says_what_an_op_waits_on(browser, tmp_path):
    path = viz(tmp_path, "h.html", "1f1b", "-D", "P=4", "-D", "M=8")
    errors: list[str] = []
    page = page_for(browser, path, errors)
    g = page.evaluate(
        "(() => { const g = ppirViz.geom(); return {x: g.x(1.5), "
        "y: g.panels[0].rowsTop + 1.5 * g.rowH}; })()"
    )
    box = page.locator("#main").bounding_box()
    page.mouse.move(box["x"] + g["x"], box["y"] + g["y"])
    tip = page.locator("#tip")
    assert tip.is_visible()
    text = tip.inner_text()
    assert "F0@s1" in text and "start 1, end 2" in text and "input F0@s0 on r0" in text
    page.mouse.click(box["x"] + g["x"], box["y"] + g["y"])  # a click opens that rank's view
    assert page.evaluate("[ppirViz.state.view, ppirViz.state.rank]") == ["local", 1]
    assert not errors, errors


def test_large_schedule_opens_and_plays_smoothly(browser, tmp_path):
    path = viz(tmp_path, "big.html", "interleaved_1f1b", "-D", "P=32", "-D", "M=128", "-D", "v=2")
    errors: list[str] = []
    t0 = time.monotonic()
    page = page_for(browser, path, errors)
    assert time.monotonic() - t0 < 15
    per_frame = page.evaluate("""() => { const v = ppirViz, T = v.data.runs[0].step;
      v.setMode("dynamic"); const t0 = performance.now();
      for (let k = 1; k <= 20; k++) v.seek(k / 20 * T);
      return (performance.now() - t0) / 20; }""")
    assert per_frame < 100, f"{per_frame:.0f} ms per frame"
    page.evaluate("ppirViz.seek(0)")
    frames = page.evaluate("ppirViz.state.drawn.frames")
    page.click("#play")
    page.wait_for_timeout(1000)
    assert page.evaluate("ppirViz.state.drawn.frames") - frames > 10
    assert page.evaluate("ppirViz.state.t") > 0
    assert not errors, errors


def test_the_page_draws_exposed_comm_and_a_reduction_on_an_idle_rank(browser, tmp_path):
    """The page drew no communication on the rows: a rank waiting on its messages, or running
    its data-parallel gradient reduction after its last backward, looked idle.  It now fills
    the estimator's exposed-comm intervals in the comm colour (with free links and no
    reduction, none)."""
    comm = (204, 121, 167)  # ppir.viz.layout.KIND_COLORS["comm"]
    args = ["1f1b", "-D", "P=4", "-D", "M=8"]
    counts = {}
    for name, extra in (("free", []), ("dp", ["--comm-latency", "0.25", "--dp", "4"])):
        errors: list[str] = []
        page = page_for(browser, viz(tmp_path, f"{name}.html", *args, *extra), errors)
        page.click("#mode-static")
        counts[name] = count_color(page, comm, tol=8)
        legend = page.inner_text("#legend")
        assert ("exposed comm" in legend) == (name == "dp")
        assert not errors, errors
    assert counts["free"] == 0 and counts["dp"] > 500, counts
