"""The worker process's runtime: periodic work, e-mail and webhook delivery run together."""
