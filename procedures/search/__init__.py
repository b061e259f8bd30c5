"""`jobs.search`: a job board's search box over the published jobs (CONTRACT.md §15, docs/search.md)."""
