"""The outside judges on the public pages: Lighthouse (mobile and desktop) and the Nu HTML Checker.

One gunicorn instance (2 gthread workers, SITE_URL on its own address) on a fresh SQLite
database in a temporary directory (bench/judged_site.py). Through the JSON API an editor's
token uploads two photos (JPEG, 2000 × 1333 and 1200 × 800) and publishes --posts posts: one
with both photos between paragraphs (the second a captioned figure), one of text only
(headings, nested lists, a quote, a table, code, links), the rest short; a draft gets a
preview link. Then:

- the Nu HTML Checker (vnu.jar --format json, one JVM) reads every public HTML page as a
  reader gets it: the home page with nothing published, without a site description and with
  one, its page 2, the post with the photos, the post without, the 404 page, the sign-in
  page and the draft's preview page; and site.css (--css);
- Lighthouse scores the home page and the post with the photos, mobile (its default:
  simulated slow 4G, a 412 px phone) and desktop (--preset=desktop) --runs times each (the
  median per category, the audits that cost points in any run, the hints that cost none),
  and once with the dark colour scheme (accessibility only: site.css's dark palette);
- the answers that are not HTML are checked for what they are: the feed and the sitemap
  parse as XML with their media types, /robots.txt is text/plain naming the sitemap.

Tools (not the project's: installed in a scratch directory, see docs/benchmarks.md):

    mkdir -p ../judges-tools && (cd ../judges-tools && npm install lighthouse@12 vnu-jar)
    .venv/bin/python bench/judges.py [--tools ../judges-tools] [--chrome PATH] [--runs 3]
        [--keep DIR]

--tools names that directory (or give --lighthouse and --vnu); Chromium is --chrome, else
$CHROME_PATH, else /usr/bin/chromium, else /usr/bin/chromium-headless-shell; java runs
vnu.jar. Exits 2 naming what is missing. Nothing is left behind (the instance stopped, the
directory removed) unless --keep names a directory for the pages and Lighthouse's reports.
"""

import argparse
import collections
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, command_line, log, run_main, table  # noqa: E402
from judged_site import Site, slug  # noqa: E402

CATEGORIES = ("performance", "accessibility", "best-practices", "seo")
TARGET = 95  # every category, mobile, home and a post with an image
QUOTED = re.compile(r"“[^”]*”(?= for attribute)")  # a value: the same message for each
LIGHTHOUSE_PAGES = ("home, no site description", "post with an image")
CHROMES = ("/usr/bin/chromium", "/usr/bin/chromium-headless-shell")


@dataclass
class Tools:
    lighthouse: Path
    vnu: Path
    java: str
    chrome: str


def parse_args() -> argparse.Namespace:
    """Read the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=Path, default=ROOT.parent / "judges-tools",
                        help="the directory `npm install lighthouse@12 vnu-jar` ran in")
    parser.add_argument("--lighthouse", type=Path, help="the lighthouse CLI (default: in --tools)")
    parser.add_argument("--vnu", type=Path, help="vnu.jar (default: in --tools)")
    parser.add_argument("--java", default=shutil.which("java") or "java")
    parser.add_argument("--chrome", default=os.environ.get("CHROME_PATH") or next(
        (c for c in CHROMES if os.access(c, os.X_OK)), ""))
    parser.add_argument("--runs", type=int, default=3, help="Lighthouse runs per page and form")
    parser.add_argument("--posts", type=int, default=22, help="published posts (20 a page)")
    parser.add_argument("--keep", type=Path, help="keep the pages, Lighthouse's reports, the "
                        "database and the instance's log in this directory")
    return parser.parse_args()


def find_tools(args: argparse.Namespace) -> Tools:
    """Return the tools' paths; exit 2 naming the first that is missing."""
    tools = Tools(
        lighthouse=args.lighthouse or args.tools / "node_modules/.bin/lighthouse",
        vnu=args.vnu or args.tools / "node_modules/vnu-jar/build/dist/vnu.jar",
        java=args.java, chrome=args.chrome)
    missing = [what for what, ok in (
        (f"lighthouse ({tools.lighthouse})", os.access(tools.lighthouse, os.X_OK)),
        (f"vnu.jar ({tools.vnu})", tools.vnu.is_file()),
        (f"java ({tools.java})", shutil.which(tools.java) is not None),
        (f"Chromium ({tools.chrome or 'none of ' + ', '.join(CHROMES)})",
         bool(tools.chrome) and os.access(tools.chrome, os.X_OK))) if not ok]
    if missing:
        print(f"missing: {'; '.join(missing)}. See docs/benchmarks.md, 'Outside judges'.",
              file=sys.stderr)
        sys.exit(2)
    return tools


# --- the Nu HTML Checker ------------------------------------------------------------------


def nu(tools: Tools, files: dict[str, Path], css: bool = False) -> dict[str, list[dict]]:
    """Return the checker's messages for each file (one JVM for them all)."""
    command = [tools.java, "-jar", str(tools.vnu), "--format", "json", "--exit-zero-always",
               *(["--css"] if css else []), *map(str, files.values())]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    found: dict[str, list[dict]] = {label: [] for label in files}
    by_path = {path.resolve(): label for label, path in files.items()}
    for message in json.loads(done.stderr)["messages"]:
        where = Path(message.get("url", "").removeprefix("file:")).resolve()
        found.setdefault(by_path.get(where, "(the checker)"), []).append(message)
    return found


def is_error(message: dict) -> bool:
    return message["type"] in ("error", "non-document-error")


def is_warning(message: dict) -> bool:
    return message["type"] == "info" and message.get("subType") == "warning"


def nu_rows(found: dict[str, list[dict]]) -> tuple[list[list[object]], list[str]]:
    """Return the table's rows (errors, warnings) and a note for each kind of message."""
    rows, notes = [], []
    for label, messages in found.items():
        errors, warnings = sum(map(is_error, messages)), sum(map(is_warning, messages))
        rows.append([label, errors, warnings, "yes" if errors == 0 else "**no**"])
        kinds = collections.Counter(
            (m["type"], QUOTED.sub("“…”", m["message"]))
            for m in messages if is_error(m) or is_warning(m))
        notes += [f"Nu, {label}: {n} × {'error' if kind != 'info' else 'warning'}: {text}"
                  for (kind, text), n in kinds.items()]
    return rows, notes


# --- Lighthouse ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Form:
    """A way Lighthouse looks at a page."""

    name: str
    flags: tuple[str, ...] = ()
    chrome: str = ""  # more Chromium flags
    categories: tuple[str, ...] = CATEGORIES
    once: bool = False  # scores that do not vary from run to run: one run


FORMS = (Form("mobile"), Form("desktop", ("--preset=desktop",)),
         # site.css's dark palette (prefers-color-scheme: dark; Blink's setting 0 is dark),
         # for its contrast: only accessibility differs from the light page
         Form("mobile, dark scheme", chrome="--blink-settings=preferredColorScheme=0",
              categories=("accessibility",), once=True))


def lighthouse_once(tools: Tools, url: str, form: Form, out: Path) -> dict:
    """Run Lighthouse once; return its report (the JSON it wrote)."""
    command = [str(tools.lighthouse), url, "--quiet", "--output=json", f"--output-path={out}",
               f"--only-categories={','.join(form.categories)}",
               f"--chrome-flags=--headless=new --no-sandbox --disable-gpu {form.chrome}".strip(),
               *form.flags]
    env = {**os.environ, "CHROME_PATH": tools.chrome}
    subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.read_text())


def lost_points(report: dict) -> list[str]:
    """Return the scored audits below 1 in a report, as 'category: audit (score)'."""
    lost = []
    for name, category in report["categories"].items():
        for ref in category["auditRefs"]:
            audit = report["audits"][ref["id"]]
            if ref["weight"] > 0 and audit["score"] is not None and audit["score"] < 1:
                lost.append(f"{name}: {ref['id']} ({audit['score']:.2f})")
    return lost


def hints(report: dict) -> list[str]:
    """Return the insights that found something without costing points (weight 0)."""
    found = []
    for ref in report["categories"].get("performance", {}).get("auditRefs", []):
        audit = report["audits"][ref["id"]]
        if ref["weight"] == 0 and audit["score"] is not None and audit["score"] < 1 and (
                audit["scoreDisplayMode"] == "metricSavings"):
            saving = audit.get("displayValue", "").replace("\xa0", " ")
            found.append(f"{ref['id']}" + (f" ({saving})" if saving else ""))
    return found


def lighthouse(tools: Tools, url: str, form: Form, runs: int, stem: Path) -> dict:
    """Run Lighthouse runs times (reports in stem-<n>.json); return the median score per
    category, the median LCP and every audit that cost points in any run."""
    reports = [lighthouse_once(tools, url, form, Path(f"{stem}-{i + 1}.json"))
               for i in range(1 if form.once else runs)]
    scores = {name: statistics.median(r["categories"][name]["score"] * 100 for r in reports)
              for name in form.categories}
    lcp = statistics.median(r["audits"]["largest-contentful-paint"]["numericValue"]
                            for r in reports) if "performance" in scores else None
    lost = sorted({audit for r in reports for audit in lost_points(r)})
    return {"scores": scores, "lcp": lcp, "lost": lost, "runs": len(reports),
            "hints": hints(reports[0]),
            "version": reports[0]["lighthouseVersion"],
            "chrome": reports[0]["environment"]["hostUserAgent"]}


def lighthouse_row(label: str, form: str, result: dict) -> list[object]:
    """Return one page's and form factor's row of the Lighthouse table."""
    scores = result["scores"]
    met = "yes" if min(scores.values()) >= TARGET else "**no**"
    return [label, form, result["runs"],
            *(f"{scores[name]:.0f}" if name in scores else "–" for name in CATEGORIES),
            "–" if result["lcp"] is None else f"{result['lcp'] / 1000:.1f} s",
            "; ".join(result["lost"]) or "none", met if form == "mobile" else "–"]


# --- the run ------------------------------------------------------------------------------


def judge(args: argparse.Namespace, tools: Tools, scratch: Path) -> dict:
    """Start the site, seed it, run both judges; return what they said."""
    with Site(scratch) as site:
        saved = {"home, nothing published": site.save("home, nothing published", "/")}
        pages = site.seed(args.posts)
        saved |= {label: site.save(label, path) for label, path in pages.items()}
        light = {(label, form.name): lighthouse(
                     tools, site.url + pages[label], form, args.runs,
                     scratch / f"lighthouse-{slug(label)}-{slug(form.name)}")
                 for label in LIGHTHOUSE_PAGES for form in FORMS}
        site.describe("Boats, tides and the harbour's news, every morning.")
        saved["home, with a site description"] = site.save("home, with a site description",
                                                             "/")
        others = site.check_not_html()
        css = site.save("site.css", "/static/css/site.css")
    return {"nu": nu(tools, saved), "css": nu(tools, {"site.css": css}, css=True),
            "lighthouse": light, "others": others}


def stop(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    args = parse_args()
    tools = find_tools(args)
    signal.signal(signal.SIGTERM, stop)  # cleaned up as on Ctrl-C
    load = os.getloadavg()[0]
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        if any(args.keep.iterdir()):
            sys.exit(f"--keep {args.keep}: not empty (the site starts from a fresh database)")
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="soloist-judges-"))
    try:
        found = judge(args, tools, scratch)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print_report(args, tools, found, load)


def print_report(args: argparse.Namespace, tools: Tools, found: dict, load: float) -> None:
    """Print the tables, with the tools' versions and the machine's loop speed."""
    from tests.conftest import REFERENCE_LOOP, _reference_loop

    loop = min(_reference_loop() for _ in range(3))
    html_rows, notes = nu_rows(found["nu"])
    css_rows, css_notes = nu_rows(found["css"])
    light = found["lighthouse"]
    first = next(iter(light.values()))
    print(f"\n## Outside judges\n\nCommand: `{command_line()}`  \n"
          f"Machine: {os.cpu_count()} CPUs; load average (1 min) {load:.2f} at the start, "
          f"{os.getloadavg()[0]:.2f} at the end; {REFERENCE_LOOP:,} Python additions in "
          f"{loop * 1000:.0f} ms (best of 3, after the run; tests/conftest.py)  \n"
          f"Lighthouse {first['version']}, {first['chrome']}; {nu_version(tools)}\n")
    print("### Lighthouse (the median of the runs)\n")
    print(table(["page", "form factor", "runs", "performance", "accessibility", "best practices",
                 "SEO", "LCP", "audits that cost points", f">= {TARGET} (mobile)?"],
                [lighthouse_row(label, form, r) for (label, form), r in light.items()]))
    print("\n### Nu HTML Checker\n")
    print(table(["page", "errors", "warnings", "0 errors?"], html_rows + css_rows))
    print("\n### Not HTML\n")
    print(table(["answer", "checked", "fine?"], found["others"]))
    print()
    hinted = [f"Lighthouse's hints, no points lost ({label}, {form}, first run): "
              + ", ".join(r["hints"]) for (label, form), r in light.items() if r["hints"]]
    for note in notes + css_notes + hinted:
        print(f"- {note}")
    sys.stdout.flush()


def nu_version(tools: Tools) -> str:
    done = subprocess.run([tools.java, "-jar", str(tools.vnu), "--version"],
                          capture_output=True, text=True, timeout=60)
    return f"Nu HTML Checker {done.stdout.strip()}"


if __name__ == "__main__":
    started = time.monotonic()
    run_main(main)
    log(f"done in {time.monotonic() - started:.0f} s")
