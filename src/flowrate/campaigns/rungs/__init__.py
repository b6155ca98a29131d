"""Multi-fidelity stopping: the rungs of run length and the promotion rule (ladder), and a run
that goes on through its rungs in one process, measured at each, stopping where it is beaten
there (watch). flowrate explore uses both; a job that goes on through rungs (process.job) runs
the watch."""
