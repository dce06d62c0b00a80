"""Media: a file by its content address (200), with its ETag (304), a 12 MP upload, a GIF bomb.

One gunicorn instance (WEB_CONCURRENCY=2 gthread workers, schedulers running) serves a fresh
PostgreSQL database holding FILES images (small JPEGs of a few kB, uploaded through
webapp.media as the editors' uploads are, so each has its widths). wrk asks, over
--connections connections, for a random one of them per request:

- the image by its content address as a first-time reader does (200: one read of its bytes
  on the worker's revalidation connection, before Flask runs);
- the same with If-None-Match: the address's ETag (304, answered from the address alone:
  no read at all);

then a 12-megapixel JPEG (4000 × 3000, camera-like noise, with EXIF) is uploaded through
POST /api/media, --uploads times: EXIF stripped, re-encoded, its four widths and their WebP
copies made and everything stored; the time is the request's, end to end, as the editor
waits for it. Then a GIF of 20 frames of 2000 × 2000 pixels (773 bytes, 320 MB decoded) is
sent --uploads times: refused (422) past MEDIA_MAX_DECODED_MB, timed end to end, with how
far each worker's peak memory (VmHWM, reset before each) rose. The machine's loop speed
(tests/conftest.py) is printed with the tables. Statuses are counted from gunicorn's
access log; the database is dropped on the way out.

    .venv/bin/python bench/media.py [--files 1000] [--connections 16] [--threads 2]
        [--duration 15] [--warmup 5] [--uploads 5]

Needs wrk (apt-get install -y wrk); exits 2 without it.
"""

import argparse
import io
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from site_cache import measure, wrk_arguments  # noqa: E402
from web_perf import find_wrk  # noqa: E402

SERVED_TARGET = 1500.0
NOT_MODIFIED_TARGET = 2500.0
UPLOAD_TARGET = 2.0  # seconds
REFUSAL_TARGET = 1.0  # seconds to refuse the GIF bomb (2000 × 2000 × 20 frames)
RSS_TARGET = 50  # MB a worker's peak memory may grow meanwhile

RANDOM_LUA = """
local paths = {{}}
for line in io.lines("{path}") do paths[#paths + 1] = line end
math.randomseed(os.time())
request = function()
  local i = math.random(1, #paths)
  return wrk.format("GET", paths[i]{headers})
end
"""
CONDITIONAL = (', {["If-None-Match"] = "\\"" .. string.sub(paths[i], 8, 39) .. "-orig.jpg\\""}')


def fill(url: str, n: int) -> list[str]:
    """Upload n small distinct JPEGs through webapp.media; return their content addresses."""
    from PIL import Image

    from tests.support import make_app
    from webapp import media
    from webapp.extensions import db

    app = make_app(url)
    paths = []
    with app.app_context():
        for i in range(n):
            picture = Image.new("RGB", (640, 427), (i % 256, (i // 256) * 40 % 256, 90))
            buffer = io.BytesIO()
            picture.save(buffer, "JPEG", quality=85)
            row, _added = media.upload(buffer.getvalue(), f"bench-{i}.jpg", f"Bench {i}",
                                       10_000_000, None)
            paths.append(media.media_path(row.sha256, "orig", row.ext))
        db.session.remove()
        db.engine.dispose()
    return paths


def twelve_megapixels(n: int) -> bytes:
    """Return the n-th 4000 × 3000 JPEG that compresses like a photo (noise), with EXIF GPS."""
    from PIL import Image

    picture = Image.effect_noise((4000, 3000), 40).convert("RGB")
    picture.paste((n * 40 % 256, 0, 0), (0, 0, 64, 64))  # each upload a file of its own
    exif = Image.Exif()
    exif[0x0112] = 1
    exif.get_ifd(0x8825).update({1: "N", 2: (48.0, 51.0, 24.0)})
    buffer = io.BytesIO()
    picture.save(buffer, "JPEG", quality=90, exif=exif)
    return buffer.getvalue()


def upload_once(base: str, token: str, data: bytes, n: int) -> float:
    """POST one multipart upload (distinct bytes each time); return its seconds."""
    from tests.cluster import post_media

    started = time.monotonic()
    status, answer = post_media(base, token, data, f"photo-{n}.jpg", f"Bench photo {n}")
    if status != 201:
        raise RuntimeError(f"upload answered {status}: {answer}")
    return time.monotonic() - started


def refuse_gif(inst, token: str, runs: int) -> list[tuple[float, float]]:
    """POST the 2000 × 2000 × 20-frame GIF runs times; return each refusal's seconds and
    the most any worker's peak memory (VmHWM, reset first) rose during it, in MB."""
    from tests import media_files
    from tests.cluster import peak_rss_mb, post_media

    gif, found = media_files.animated_gif(), []
    for _ in range(runs):
        before = {pid: peak_rss_mb(pid, reset=True) for pid in inst.worker_pids()}
        started = time.monotonic()
        status, answer = post_media(inst.url, token, gif, "dance.gif")
        seconds = time.monotonic() - started
        if status != 422 or answer.get("field") != "file":
            raise RuntimeError(f"the GIF answered {status}: {answer}")
        found.append((seconds, max(peak_rss_mb(pid) - mb for pid, mb in before.items())))
    return found


def start_instance(bench):
    """Start one instance of 2 workers and wait until it answers (Bench stops it after).

    Not Bench.start_fleet: this bench needs gunicorn answering, not the keys held.
    """
    from common import Instance, wait_for

    inst = Instance("bench1", bench.url, workers=2, log_dir=bench.log_dir).start()
    bench.instances.append(inst)

    def up() -> bool:
        try:
            with urllib.request.urlopen(inst.url + "/healthz", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    wait_for(up, 60, "gunicorn answering /healthz", interval=0.1)
    return inst


def run(args: argparse.Namespace, wrk: str) -> tuple[list[dict], list[float], int, list]:
    from common import Bench, log

    from tests.support import cli_user

    results = []
    with Bench("media") as bench, tempfile.TemporaryDirectory(prefix="soloist-media-") as tmp:
        log(f"uploading {args.files:,} images through webapp.media")
        started = time.monotonic()
        paths = fill(bench.url, args.files)
        log(f"{len(paths):,} files in {time.monotonic() - started:.1f} s")
        bench.execute("VACUUM ANALYZE media_files")
        bench.execute("VACUUM ANALYZE media_variants")
        token = cli_user(bench.url, "bench-editor@example.com", "editor")
        log("starting 1 gunicorn instance x 2 workers")
        inst = start_instance(bench)
        listed = Path(tmp) / "paths.txt"
        listed.write_text("\n".join(paths) + "\n")
        plain, conditional = Path(tmp) / "plain.lua", Path(tmp) / "conditional.lua"
        plain.write_text(RANDOM_LUA.format(path=listed, headers=""))
        conditional.write_text(RANDOM_LUA.format(path=listed, headers=CONDITIONAL))
        for what, script in (("image by content address, random of the files (200)", plain),
                             ("the same, If-None-Match with its ETag (304)", conditional)):
            results.append(measure(bench, inst, wrk, args, what, f"{inst.url}/media/", script,
                                   "/media/"))
        photos = [twelve_megapixels(i) for i in range(args.uploads)]
        photo = photos[0]
        log(f"uploading a 12-megapixel JPEG ({len(photo) / 1e6:.1f} MB) {args.uploads} times")
        times = [upload_once(inst.url, token, data, i) for i, data in enumerate(photos)]
        log("uploads: " + ", ".join(f"{t:.2f} s" for t in times))
        refusals = refuse_gif(inst, token, args.uploads)
        log("GIF refusals: " + ", ".join(f"{t:.3f} s (+{mb:.1f} MB)" for t, mb in refusals))
    return results, times, len(photo), refusals


def print_report(args, results: list[dict], times: list[float], photo_size: int,
                 refusals: list[tuple[float, float]]) -> None:
    from common import report, table

    rows = []
    for r, (target, status) in zip(results, [(SERVED_TARGET, "200"),
                                              (NOT_MODIFIED_TARGET, "304")], strict=True):
        served = r["statuses"]
        right = served.get(status, 0) == sum(served.values()) > 0
        cpu, n = r["cpu"], max(1, r["requests"])
        own = (cpu["app"] + cpu["pg"]) / n * 1000
        rows.append([r["what"], f"{r['rps']:.0f}", f"{r['p50']:.1f} ms", f"{r['p99']:.1f} ms",
                     ", ".join(f"{k:,} × {s}" for s, k in sorted(served.items())),
                     f"{own:.2f} ms", f"{cpu['others'] / cpu['wall_cores'] * 100:.0f} %",
                     f">= {target:,.0f} req/s",
                     "yes" if r["rps"] >= target and right else "**no**"])
    from tests.conftest import REFERENCE_LOOP, _reference_loop

    worst, loop = max(times), min(_reference_loop() for _ in range(3))
    upload_rows = [[f"12 MP JPEG ({photo_size / 1e6:.1f} MB) → stored with 480/640/960/1600 "
                    "widths and their WebP copies",
                    str(len(times)), f"{sorted(times)[len(times) // 2]:.2f} s", f"{worst:.2f} s",
                    f"<= {UPLOAD_TARGET:g} s", "yes" if worst <= UPLOAD_TARGET else "**no**"]]
    seconds, grown = sorted(t for t, _ in refusals), max(mb for _, mb in refusals)
    slowest = seconds[-1]
    refusal_rows = [["GIF, 2000 × 2000 pixels × 20 frames (773 bytes) → 422 naming the limit",
                     str(len(refusals)), f"{seconds[len(seconds) // 2]:.3f} s",
                     f"{slowest:.3f} s", f"+{grown:.1f} MB",
                     f"<= {REFUSAL_TARGET:g} s, <= +{RSS_TARGET} MB",
                     "yes" if slowest <= REFUSAL_TARGET and grown <= RSS_TARGET else "**no**"]]
    report("Media: served by content address, revalidated, uploaded", [
        ("Serving (wrk, measured run after a warm-up)",
         table(["run", "req/s", "p50", "p99", "answers (access log)",
                "CPU / request (gunicorn + PostgreSQL)", "CPU used by other work", "target",
                "met?"], rows)),
        ("Upload (POST /api/media, end to end)",
         table(["upload", "runs", "median", "slowest", "target", "met?"], upload_rows)),
        ("Refused past the decoding budget (POST /api/media, end to end)",
         table(["upload", "runs", "median", "slowest", "worker's peak memory (VmHWM), most "
                "grown", "target", "met?"], refusal_rows)),
    ], [
        f"Machine speed: {REFERENCE_LOOP:,} Python additions in {loop * 1000:.0f} ms "
        "(best of 3, after the run; tests/conftest.py).",
        f"Server: 1 gunicorn instance, WEB_CONCURRENCY=2 workers, gthread, GUNICORN_THREADS="
        f"{os.environ.get('GUNICORN_THREADS', '4 (default)')}, schedulers running; "
        f"{args.files:,} files of 640 × 427 pixels (the original and its 480 width).",
        f"wrk -t{args.threads} -c{args.connections} -d{args.duration:g}s, on the same "
        f"{os.cpu_count()}-CPU machine as gunicorn and PostgreSQL (and other people's work).",
        "The upload's time is the slowest of the runs against the target: decoding, EXIF "
        "stripped, re-encoding, four widths and four WebP copies, the SHA-256 and the "
        "INSERTs, one request each.",
    ])


def parse_args() -> argparse.Namespace:
    parser = wrk_arguments(__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--uploads", type=int, default=5, help="12 MP uploads timed")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    wrk = find_wrk()
    print_report(args, *run(args, wrk))


if __name__ == "__main__":
    from common import run_main

    run_main(main)
