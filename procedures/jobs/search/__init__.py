"""`jobs.search`: a job board's search box over the published jobs (docs/search.md)."""
