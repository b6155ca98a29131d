"""`flowrate compare --run`: two sides measured now, alternately A B B A … (interleave: the order
and the stopping rule), each side at a git revision if asked (revisions)."""
