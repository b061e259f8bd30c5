"""Outgoing e-mail (docs/people.md): composed from templates, written with the change it announces, sent by the
queue's workers over SMTP, or kept as `.eml` files when no SMTP server is configured."""
