"""The release phase: migrations that never stop the running fleet, and what a release says.

A release runs beside the old fleet (Heroku's release phase, Render's pre-deploy command),
so no migration may make the fleet wait. `runner` is how migrations/env.py runs them: each
in its own transaction, every statement waiting at most MIGRATION_LOCK_TIMEOUT_SECONDS for
a lock, a migration that gave way tried again after a back-off. `steps` are the shapes a
migration is written in (indexes built concurrently, constraints added NOT VALID then
validated, columns added alone, backfills in batches). `plan` reads the SQL each migration
emits and names the locks it takes (`release --dry-run`, and the report); `fleet` knows the
version every lock session runs and refuses a contract step while older code runs;
`report` measures a release. `cli` is `flask --app webapp release`.

Imports the bottom of the house (config, db, extensions, models, version), leadership's
view of the lock sessions and ops.deploys (a release records its deploy); Alembic only
inside functions, where a release or a migration uses it.
"""
