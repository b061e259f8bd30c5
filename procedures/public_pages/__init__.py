"""What a job board shows the world: each published job's page (with its schema.org `JobPosting`), applying
from it, a candidate's own home, the public job search, the sitemap and the aggregators' XML feed
(docs/public-pages.md). Handed to the framework as routes (`Business.public_routes`)."""
