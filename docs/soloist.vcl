# Varnish in front of Soloist, purged by surrogate key (varnish-modules' xkey).
# Soloist tags every public answer with Surrogate-Key; with CACHE_PURGE=varnish+http://HOST:PORT
# it sends `PURGE /` with `xkey-purge: <keys>` (a takedown) or `xkey-softpurge: <keys>`.
vcl 4.1;

import xkey;

backend soloist {
    .host = "127.0.0.1";
    .port = "8000";
}

# who may purge: the Soloist instances (their addresses as Varnish sees them), never readers
acl purgers {
    "127.0.0.1";
    "::1";
}

sub vcl_recv {
    if (req.method == "PURGE") {
        if (client.ip !~ purgers) {
            return (synth(403, "Not allowed to purge."));
        }
        if (req.http.xkey-purge) {
            set req.http.n-gone = xkey.purge(req.http.xkey-purge);
        } elsif (req.http.xkey-softpurge) {
            set req.http.n-gone = xkey.softpurge(req.http.xkey-softpurge);
        } else {
            return (synth(400, "Give the keys in xkey-purge or xkey-softpurge."));
        }
        return (synth(200, "Invalidated " + req.http.n-gone + " objects."));
    }
}

sub vcl_backend_response {
    # xkey indexes the xkey header; Soloist names its keys in Surrogate-Key
    if (beresp.http.Surrogate-Key && !beresp.http.xkey) {
        set beresp.http.xkey = beresp.http.Surrogate-Key;
    }
}
