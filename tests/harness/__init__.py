"""What the tests and benchmarks stand on, apart from the tests themselves.

The app and its users (support), fleets of real gunicorn instances (cluster, faultkit),
throwaway servers (pgserver, pgbouncer, edge: Varnish, cache_apis), hosts cut off the network
(netfault), receivers (receiver, traffic), a passkey device (authenticator), images
(media_files), the fault scenarios (chaos, failover, outage, partition, scenarios, slowdb,
handover), the previous release (previous_release), the test database emptied between
tests (database), the machine's speed (speed), and the suite's pytest hooks (plugin: the run
order across xdist workers).
"""
