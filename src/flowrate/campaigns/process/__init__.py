"""Process running: a campaign's point as a job (job), run in a fresh process forked from a fork
server or spawned (child, fork_preload), and where a batch of jobs runs: one after another on
this machine (executor), or as Slurm jobs through submitit (cluster)."""
