"""`flowrate explore`: a search for a configuration space's frontier without running the whole
grid. The space (space), the objectives and constraints (objectives), the file's settings
(settings), the plan and budget (plan), the sampler (study), the engine (engine), the points it
proposes itself (proposals), the real evaluation through an executor (evaluate) and one session
per study (session). Its rungs of run length live in flowrate.campaigns.rungs."""
