"""Ops: what the people who run the fleet read and do, all computed from the database.

Owns the audit log (audit), alerts written to the outbox (alerts), Prometheus metrics
(metrics), publishing and timer freezes (freezes), the deploy record and report
(deploys), the release phase and the shapes of its migrations (release), the connection
budget (budget), the replica gate an event's deliveries wait at (replica) and the ops
actions on a key's leader: step down, evict (leaders). It may import the bottom of the
house (config, db, extensions, models, refusals, timefmt, version) and leadership (keys,
the pg_locks view, status); every
domain package (accounts, site, posts, plugins, timers, scheduling) writes its audit
rows and alerts through it, so it imports none of them, nor views.
"""
