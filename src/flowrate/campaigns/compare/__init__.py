"""`flowrate compare --run`: two sides measured now, each run recorded as it ends, then compared
(live), alternately A B B A … (interleave: the order and the stopping rule), each side at a git
revision if asked (revisions); with a time budget, a first block and a plan for the rest
(budgeted, plan)."""
