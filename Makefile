# Two commands for a newcomer: `make run` and `make test`. Both install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
SECRET_FILE := instance/secret_key

.PHONY: run test install system-deps bench clean

# uv installs what pip would, from the same PyPI, in half the time (10 s against 21 s on a
# 2-core machine, bytecode compiled as pip does: every process of the suite imports it);
# pip stays the way in wherever uv cannot be had. The venv gets no pip of its own when the
# system's pip can put uv in it (`pip --python`): 1.6 s against 4 s for ensurepip and then uv.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv --without-pip $(VENV)
	test -x $(BIN)/uv || $(PYTHON) -m pip --python $(BIN)/python install -q uv 2>/dev/null \
		|| { $(BIN)/python -m ensurepip >/dev/null && $(BIN)/python -m pip install -q uv; } \
		|| echo "uv unavailable: installing with pip"
	if [ -x $(BIN)/uv ]; then \
		$(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python -e '.[dev]'; \
	else \
		{ $(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip >/dev/null; } && \
		$(BIN)/python -m pip install -q --upgrade pip && $(BIN)/python -m pip install -q -e '.[dev]'; \
	fi
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

$(SECRET_FILE):
	mkdir -p instance
	$(BIN)/python -c "import secrets; print(secrets.token_urlsafe(32))" > $(SECRET_FILE)
	chmod 600 $(SECRET_FILE)

## Run Soloist on the embedded SQLite database (or $$DATABASE_URL), port $$PORT or 8000.
# The server starts first; once it answers (or within 60 s; a server that stops stops
# this), ensure-admin prints the address to open and the first admin's one-time password in
# a box: last, below the migrations' and the server's own lines.
run: install $(SECRET_FILE)
	export SECRET_KEY="$${SECRET_KEY:-$$(cat $(SECRET_FILE))}"; \
	export SITE_URL="$${SITE_URL:-http://localhost:$${PORT:-8000}}"; \
	address="http://localhost:$${PORT:-8000}"; \
	$(BIN)/flask --app webapp db upgrade || exit 1; \
	$(BIN)/gunicorn -c webapp/gunicorn_conf.py "webapp:create_app()" & server=$$!; \
	trap 'kill -TERM $$server 2>/dev/null' INT TERM; \
	tries=0; until $(BIN)/python -c "import urllib.request as r; \
		r.urlopen('$$address/healthz', timeout=5)" 2>/dev/null; do \
		kill -0 $$server 2>/dev/null || exit 1; \
		tries=$$((tries + 1)); [ $$tries -lt 200 ] || break; sleep 0.3; \
	done; \
	$(BIN)/flask --app webapp ensure-admin --url "$$address"; \
	wait $$server; wait $$server 2>/dev/null

# Debian packages the tests drive for real: PgBouncer and headless Chromium (root only).
system-deps:
	@missing=""; \
	test -x /usr/sbin/pgbouncer || missing="$$missing pgbouncer"; \
	test -x /usr/lib/chromium/chromium-headless-shell || missing="$$missing chromium-headless-shell"; \
	test -x /usr/sbin/varnishd || missing="$$missing varnish"; \
	ls /usr/lib/*/varnish/vmods/libvmod_xkey.so >/dev/null 2>&1 || missing="$$missing varnish-modules"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing$$missing"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
		else \
			echo "note: install$$missing (apt-get) to run every test"; \
		fi; \
	fi

## Lint, type-check, and run every test against the local PostgreSQL (and SQLite).
test: install system-deps
	$(BIN)/ruff check webapp tests bench
	# mypy checks webapp/ beside the tests, at a lower priority: 19 s of CPU from a fresh
	# clone (0.5 s once .mypy_cache has it), while most of the suite waits on processes,
	# sockets and the database. Its report comes after theirs; either failing fails the target.
	# Bytecode cached in __pycache__ even where the environment turns it off: every gunicorn
	# worker and flask command a test starts would compile the app's sources again.
	report=$$(mktemp); nice -n 10 $(BIN)/mypy > $$report 2>&1 & checker=$$!; \
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest; tests=$$?; \
	wait $$checker; checked=$$?; cat $$report; rm -f $$report; \
	test $$tests = 0 && test $$checked = 0

bench: install
	$(BIN)/python bench/failover.py
	$(BIN)/python bench/publish_lag.py

clean:
	rm -rf $(VENV) instance .pytest_cache .mypy_cache
