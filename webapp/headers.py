"""Security headers on every response: a strict Content-Security-Policy and its companions,
and no-store on every answer that is not the public site's."""

from flask import Flask, Response, request

# Scripts and styles come only from our own files: no inline code, no eval (htmx is told not
# to need it in base.html). Images may also come over HTTPS: editors' Markdown links them.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' https:",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])

HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # admin URLs (ids, searches, next=) never leave the site; post links are noreferrer anyway
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}

# two years, the HSTS preload list's minimum; sent over HTTPS only, as browsers ignore it on HTTP
STRICT_TRANSPORT_SECURITY = "max-age=63072000; includeSubDomains"


# what readers get: the public site (pages, feed, sitemap, 404s, health checks), its files
# and icons. They keep the caching their views chose (webapp.site.httpcache); everything
# else (admin pages, settings, sign-in, the step-up prompt, the API) is kept by no cache
PUBLIC_BLUEPRINTS = ("site", "health", "media_files", "favicon")
PUBLIC_ENDPOINTS = ("static", "plugins.sitemap_xml", "previews.show")


def init_app(app: Flask) -> None:
    """Add the security headers to every response, pages, fragments, files and errors alike."""
    app.after_request(add_security_headers)
    app.after_request(no_store_unless_public)


def add_security_headers(response: Response) -> Response:
    """Set each security header the view did not set itself."""
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    # behind the platform's router, ProxyFix has applied X-Forwarded-Proto already
    if request.is_secure:
        response.headers.setdefault("Strict-Transport-Security", STRICT_TRANSPORT_SECURITY)
    return response


def public_answer() -> bool:
    """Return whether this request's answer is the public site's (no route: the site's 404)."""
    return (request.endpoint is None or request.blueprint in PUBLIC_BLUEPRINTS
            or request.endpoint in PUBLIC_ENDPOINTS)


def no_store_unless_public(response: Response) -> Response:
    """Say Cache-Control: no-store on an answer that is not the public site's, unless its
    view chose otherwise: a signed-in page, a one-time secret, a JSON answer stays in no
    browser's cache or history and in no proxy, whoever uses the computer next."""
    if public_answer():
        return response  # no route (a 404 the site draws) or a reader's answer
    response.headers.setdefault("Cache-Control", "no-store")
    return response
