"""Headless Chromium for the page tests (tests/test_pages.py): render a page, run a script in it, read the result.

:func:`run_in_browser` copies the page with a ``<script>`` appended that runs after the page has loaded, calls
the page-specific ``body`` (JavaScript that fills the object ``R``) after the common measurements, and writes
``R`` as JSON into ``<pre id=test-results>``; Chromium's ``--dump-dom`` prints the DOM, and the JSON is read
back from it.  The common measurements:

* ``fits``: ``document.documentElement.scrollWidth <= clientWidth``, i.e. the page needs no horizontal
  scrolling in the window (``clientWidth`` excludes a vertical scroll bar, so this is stricter than
  ``innerWidth``); ``scroll_width``, ``client_width``, ``inner_width`` the numbers;
* ``overflowing``: up to 8 elements that stick out to the right of the window and are not inside a
  scrolling container (a diagnostic for a failed ``fits``);
* ``error``: the message of an exception thrown by ``body``, if any.

:func:`screenshot` saves a PNG of a page at a window size (``docs/img/``); :func:`print_pdf` prints one.
:data:`NO_NETWORK` cuts a run off from every network.  Chromium comes from the OS
packages (``apt-get install chromium``; ``.ci/run`` installs it); without it :data:`SKIP_REASON` says so.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium() -> str | None:
    """The Chromium executable on PATH, ``None`` when there is none."""
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


SKIP_REASON = ("headless Chromium is not installed (`apt-get install -y chromium` on Debian/Ubuntu; .ci/run "
               "installs it): the page tests render each HTML page in a real browser")

_PRELUDE = r"""
<script>
window.addEventListener('load', function(){
  var R = {};
  try {
    var de = document.documentElement;
    R.scroll_width = de.scrollWidth; R.client_width = de.clientWidth; R.inner_width = window.innerWidth;
    R.fits = de.scrollWidth <= de.clientWidth;
    R.overflowing = [];
    var all = document.body.querySelectorAll('*');
    for (var i = 0; i < all.length && R.overflowing.length < 8; i++) {
      var el = all[i], r = el.getBoundingClientRect(), p = el.parentElement, clipped = false;
      if (r.right <= de.clientWidth + 0.5) continue;
      for (; p && p !== document.body; p = p.parentElement) {
        var ox = getComputedStyle(p).overflowX;
        if (ox === 'auto' || ox === 'scroll' || ox === 'hidden') { clipped = true; break; }
      }
      if (!clipped) R.overflowing.push(el.tagName.toLowerCase() + (el.className && el.className.baseVal === undefined ?
                                       '.' + el.className : '') + ' right=' + Math.round(r.right));
    }
    (function(R){ %s })(R);
  } catch (e) { R.error = String(e) + (e.stack ? ' ' + e.stack : ''); }
  var pre = document.createElement('pre'); pre.id = 'test-results'; pre.hidden = true;
  pre.textContent = JSON.stringify(R); document.body.appendChild(pre);
});
</script>
"""


#: Chromium switches that cut every network request off: no host name resolves, and everything else goes to a
#: proxy on a port where nothing listens.  A page that loads anything from outside fails to.
NO_NETWORK = ("--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9",
              "--proxy-bypass-list=<-loopback>")


def _profile(folder: str) -> str:
    """A fresh Chromium profile in ``folder`` whose downloads (a page's CSV export, clicked by a test) go without a
    prompt into ``folder/downloads``: a download waiting for a prompt can hold ``--dump-dom`` until the timeout."""
    prefs = Path(folder) / "Default" / "Preferences"
    prefs.parent.mkdir(parents=True, exist_ok=True)
    prefs.write_text(json.dumps({"download": {"default_directory": str(Path(folder) / "downloads"),
                                              "prompt_for_download": False, "directory_upgrade": True}}))
    return folder


def _flags(width: int, height: int, profile: str) -> list[str]:
    return ["--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={width},{height}",
            f"--user-data-dir={profile}", "--no-first-run", "--disable-extensions", "--disable-dev-shm-usage",
            "--mute-audio", "--disable-background-networking"]


def run_in_browser(page: str, body: str, width: int = 1400, height: int = 900, budget_ms: int = 5000,
                   timeout: float = 90.0, extra_flags: tuple[str, ...] = ()) -> dict[str, Any]:
    """Render ``page`` (HTML text) in headless Chromium at ``width`` × ``height``, run ``body`` (JavaScript that
    fills ``R``) after the common measurements, and return ``R``.  ``extra_flags``: more Chromium switches (e.g.
    :data:`NO_NETWORK`).

    Raises ``RuntimeError`` with Chromium's stderr when no results came back.
    """
    exe = chromium()
    if exe is None:
        raise RuntimeError(SKIP_REASON)
    script = _PRELUDE % body
    at = page.rfind("</body>")
    text = page[:at] + script + page[at:] if at >= 0 else page + script
    with tempfile.TemporaryDirectory(prefix="jaxcert-page-") as tmp:
        path = Path(tmp) / "page.html"
        path.write_text(text, encoding="utf-8")
        cmd = [exe, *_flags(width, height, _profile(str(Path(tmp) / "profile"))), *extra_flags,
               f"--virtual-time-budget={budget_ms}",
               "--dump-dom", path.as_uri()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    m = re.search(r"<pre id=\"test-results\"[^>]*>(.*?)</pre>", proc.stdout, re.S)
    if m is None:
        raise RuntimeError(f"no test results in the DOM Chromium dumped (exit {proc.returncode}); stderr tail:\n"
                           + proc.stderr[-3000:])
    return json.loads(html.unescape(m.group(1)))


def screenshot(page_path: str | Path, png_path: str | Path, width: int = 1400, height: int = 900,
               timeout: float = 90.0) -> Path:
    """Save a PNG of the page file ``page_path`` as Chromium draws it in a ``width`` × ``height`` window."""
    exe = chromium()
    if exe is None:
        raise RuntimeError(SKIP_REASON)
    page = Path(page_path)
    if not page.is_file():  # Chromium would draw its own "file not found" page
        raise FileNotFoundError(f"no page to draw: {page}")
    png = Path(png_path).resolve()
    with tempfile.TemporaryDirectory(prefix="jaxcert-shot-") as tmp:
        cmd = [exe, *_flags(width, height, _profile(str(Path(tmp) / "profile"))), "--hide-scrollbars",
               "--virtual-time-budget=3000", f"--screenshot={png}", page.resolve().as_uri()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0 or not png.exists():
        raise RuntimeError(f"chromium --screenshot failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return png


def print_pdf(page_path: str | Path, pdf_path: str | Path, timeout: float = 90.0,
              extra_flags: tuple[str, ...] = ()) -> bytes:
    """Print the page file ``page_path`` as Chromium prints it (``--print-to-pdf``, print media) to ``pdf_path``;
    return the PDF's bytes."""
    exe = chromium()
    if exe is None:
        raise RuntimeError(SKIP_REASON)
    pdf = Path(pdf_path).resolve()
    with tempfile.TemporaryDirectory(prefix="jaxcert-print-") as tmp:
        cmd = [exe, *_flags(1400, 900, _profile(str(Path(tmp) / "profile"))), *extra_flags,
               "--virtual-time-budget=3000", "--no-pdf-header-footer", f"--print-to-pdf={pdf}",
               Path(page_path).resolve().as_uri()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0 or not pdf.exists():
        raise RuntimeError(f"chromium --print-to-pdf failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return pdf.read_bytes()


def main(argv: list[str] | None = None) -> int:
    """``python -m tests._browser PAGE.html OUT.png [--width 1400] [--height 900] [--colours 128]``: a screenshot
    for the docs; ``--colours`` reduces it to a palette PNG of that many colours (Pillow) to keep it small."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tests._browser", description=main.__doc__)
    ap.add_argument("page")
    ap.add_argument("png")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=900)
    ap.add_argument("--colours", type=int, default=0)
    args = ap.parse_args(argv)
    png = screenshot(args.page, args.png, args.width, args.height)
    if args.colours:
        from PIL import Image

        with Image.open(png) as img:
            small = img.convert("RGB").quantize(colors=args.colours, method=Image.Quantize.MEDIANCUT)
        small.save(png, optimize=True)
    print(f"wrote {png} ({png.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
