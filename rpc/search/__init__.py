"""A search index beside PostgreSQL: tantivy, fed by a collection's change log and exact at the position a call
reads (docs/search.md). Knows nothing of what is indexed: the business hands in a `Corpus`."""
