"""Results: the versioned record (schema.py) and its typed sections (sections.py), read through
one codec and one migration function; its assembly and metrics, the SQLite store, merging,
comparing, and each kind's configuration identity."""
