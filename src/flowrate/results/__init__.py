"""Results: the versioned record, its assembly and metrics, the SQLite store, merging, comparing."""
