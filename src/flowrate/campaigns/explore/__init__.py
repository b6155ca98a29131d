"""`flowrate explore`: a search for a configuration space's frontier without running the whole
grid. The space (space), the objectives and constraints (objectives), the file's settings
(settings), the plan and budget (plan), the sampler (study), the engine (engine), the points it
proposes itself (proposals), the real evaluation through an executor (evaluate), one session
per study (session) and a session run against a results store (run). Its rungs of run length
live in flowrate.campaigns.rungs."""
