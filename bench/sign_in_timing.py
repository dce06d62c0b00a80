"""How long a refused sign-in takes for a known, an unknown and a deactivated email.

The password hash is computed for unknown and inactive accounts too, else a known email
answers measurably slower. Run: .venv/bin/python bench/sign_in_timing.py
(through the Flask test client on a throwaway PostgreSQL database, with the default
password hash cost; the pairs are interleaved and the failures cleared between rounds so
the sign-in limits never answer instead).
"""

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402
from werkzeug.security import generate_password_hash  # noqa: E402

from bench.common import ms, table  # noqa: E402
from tests.cluster import create_database, drop_database  # noqa: E402
from tests.support import csrf_token, make_app, migrate  # noqa: E402
from webapp.extensions import db  # noqa: E402
from webapp.models import LoginFailure, User  # noqa: E402

ROUNDS = 25
WHO = {"known": "ada@example.com", "deactivated": "gone@example.com", "unknown": None}


def main() -> None:
    url = create_database("soloist_sign_in_timing")
    try:
        app = make_app(url)
        migrate(app)
        with app.app_context():
            for email, active in (("ada@example.com", True), ("gone@example.com", False)):
                db.session.add(User(email=email, role="editor", active=active, timezone="UTC",
                                    password_hash=generate_password_hash("right password!")))
            db.session.commit()
        timings = measure(app)
        with app.app_context():
            db.engine.dispose()
    finally:
        drop_database(url)
    rows = [[who, ms(1000 * statistics.median(t)), ms(1000 * min(t)), ms(1000 * max(t))]
            for who, t in timings.items()]
    print(table(["email", "median", "min", "max"], rows))


def measure(app) -> dict[str, list[float]]:
    client = app.test_client()
    token = csrf_token(client)
    timings: dict[str, list[float]] = {who: [] for who in WHO}
    for n in range(ROUNDS):
        for who, email in WHO.items():
            started = time.perf_counter()
            answer = client.post("/login", data={"email": email or f"nobody{n}@example.com",
                                                 "password": "wrong", "csrf_token": token})
            timings[who].append(time.perf_counter() - started)
            assert answer.status_code == 401, answer.status_code
        with app.app_context():
            db.session.execute(sa.delete(LoginFailure))
            db.session.commit()
    return timings


if __name__ == "__main__":
    main()
