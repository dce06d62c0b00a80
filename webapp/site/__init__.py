"""The public site: what readers get, and how cheaply a page is answered again.

Owns the site's name, description, zone, language and the version its validators
follow (state), ETags, Last-Modified and the 304 before Flask runs (httpcache,
revalidation), absolute links from SITE_URL (urls), Markdown and the text rules it needs
(markdown, xmltext), the Article search engines read (structured), gzip for its public
text (compression), and how far a new install is set up (setup: the admin's first
steps). It may import the bottom of the house (config, db, extensions, models, refusals,
timefmt, timezones) and ops (audit); posts import it to bump the site's version in
their own transaction, so it imports no posts, plugins, timers, scheduling or views.
"""
