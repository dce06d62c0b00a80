"""Scheduling: the thread in every worker that keeps leadership and runs the ticks.

Owns the runner loop (runner), the process's one scheduler (process) and its own
connections (engines), the publish and plugin ticks and what they look at (publish,
plugin_tick, plugin_due, delivery_tick), the threads that run plugin code with a time
limit (workers) and the wait for NOTIFY (wakeup). It sits on top of the domain: it may
import leadership, ops, posts, plugins and timers, and nothing imports it but the app
factory, gunicorn's hooks and the status views' /readyz.
"""
