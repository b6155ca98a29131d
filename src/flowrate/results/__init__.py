"""Results: the versioned record (schema.py), its typed sections (sections.py, serving.py) and
each kind's typed configuration (configs.py), read through one codec and one migration function;
its assembly and metrics, the SQLite store, merging, comparing, and each kind's configuration
identity."""
