"""What people and third-party applications reach with a browser or a plain HTTP client: the web sign-in and
its server-side sessions, the OAuth 2.0 endpoints (authorize, token, revoke, metadata), and the small pages
they need (Jinja2 templates, one local stylesheet, no JavaScript)."""
