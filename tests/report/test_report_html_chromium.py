"""report.html in a real browser: headless Chromium (Debian's `chromium` package) parses it, shows its plots and
fetches nothing. Skipped where /usr/bin/chromium is missing; `.ci/run` installs it (`apt-get install -y
chromium`)."""

from __future__ import annotations

import base64
import io
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image

from ncclforensics import api
from ncclforensics.report.postmortem import write_postmortem
from fixture_paths import FIXTURES

CHROMIUM = Path("/usr/bin/chromium")
CAPTURE = FIXTURES / "real" / "nccl-2.28.9" / "extra-op-4rank"
LANE_BLUE = (76, 114, 176)  # the most common signature's colour in the timeline plot (#4C72B0)

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="headless Chromium not installed at /usr/bin/chromium (apt-get install -y chromium; .ci/run does)",
)


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """Run headless Chromium with networking and background services off and a throwaway profile."""
    command = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={tmp_path / 'profile'}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> tuple[Path, list[Path]]:
    out = tmp_path_factory.mktemp("html") / "pm"
    _, data = api.postmortem_paths([str(CAPTURE)], str(out))
    written = write_postmortem(data)
    return out / "report.html", [p for p in written if p.suffix == ".png"]


def test_dom_has_every_plot_as_a_decodable_png(page, tmp_path):
    html, pngs = page
    result = chromium(tmp_path, "--dump-dom", html.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    assert "<title>ncclforensics postmortem: diverged</title>" in dom
    for section in ("verdict", "timeline", "root-cause", "window", "wedge", "evidence-index", "caveats",
                    "how-to-reproduce"):
        assert f'id="{section}"' in dom
    assert "Root communicator: 0x1715b7bd1b8fda9e" in dom and "Root seq: 25" in dom
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"[^>]*data-file="([^"]+)"', dom)
    assert sorted(name for _, name in images) == sorted(p.name for p in pngs)
    for data, name in images:
        raw = base64.b64decode(data, validate=True)
        assert raw == (html.parent / name).read_bytes()
        with Image.open(io.BytesIO(raw)) as image:
            image.verify()


def test_screenshot_shows_the_plots(page, tmp_path):
    html, _ = page
    shot = tmp_path / "shot.png"
    result = chromium(tmp_path, "--hide-scrollbars", "--window-size=1280,4000", f"--screenshot={shot}",
                      html.as_uri())
    assert result.returncode == 0 and shot.exists(), result.stderr[-2000:]
    with Image.open(shot) as image:
        pixels = Counter({colour: n for n, colour in image.convert("RGB").getcolors(maxcolors=1 << 24)})
    assert len(pixels) > 500  # text, tables and plots, not a blank page
    assert sum(n for colour, n in pixels.items() if colour != (255, 255, 255)) > 200_000
    # The timeline plot drew (a broken image shows an icon, never these): the lanes and the window, shaded in
    # orange at alpha 0.22 over white, about (255, 235, 199).
    assert pixels[LANE_BLUE] > 5_000
    shaded = sum(n for (r, g, b), n in pixels.items() if r > 240 and 200 < g < 240 and 150 < b < 215)
    assert shaded > 5_000
