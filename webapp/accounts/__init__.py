"""Accounts: the people who use Soloist and how they prove who they are.

Owns users and roles (users), sign-in sessions kept on the server (sessions) and their
start once a sign-in is proved (signin), API tokens (tokens), sign-in limits per account
and address (throttle), limits per address on what
is asked before any proof (ratelimit), the second look before dangerous actions and the
registry of every state-changing route (stepup) and the request's user, the
roles guard and the cookie and proxy settings (security). It may import the bottom of
the house (config, db, extensions, models, refusals, timefmt) and ops (audit rows are
written in the transaction of the change); nothing above it (site, posts, plugins,
timers, scheduling, views).
"""
