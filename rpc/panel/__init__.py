"""The management panel under `/panel`: server-rendered pages behind the web sign-in, where people manage what
the API itself does not expose — API keys, webhook endpoints and their deliveries, OAuth applications and the
applications they have authorized — and see their account's plan, usage and billing.

Every page extends the web sign-in's base template and stylesheet; every state change is a POST carrying the
session's CSRF token; another account's object is a 404; a new secret is shown once, in the body of the page
that answers the POST, never in a URL. One small script (copy buttons) is served from here, so the pages keep
a Content-Security-Policy without inline scripts.
"""
