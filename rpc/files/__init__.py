"""Stored bytes of uploaded files: what a file is, how its type is told from its content, where its bytes live
(the embedded store under DATA_DIR or an S3-compatible one), the signed download links, and the sweep that
deletes bytes no File names and Files nothing refers to (docs/files.md)."""
