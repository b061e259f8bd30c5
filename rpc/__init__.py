"""The framework and service plumbing of the Hire API; it knows nothing of jobs or billing."""
