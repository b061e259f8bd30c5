"""Job postings: `draft → published → closed`, visible to their account until published. The shapes are in
`shapes.py`, the reads in `reads.py`, the writes in `writes.py`; their search (`search/`) is in the same room,
since each uses the other."""
