"""Job alerts (docs/alerts.md): saved searches with `jobs.search`'s meaning that mail the jobs
published after them, at once (`instant`) or in a daily digest."""
