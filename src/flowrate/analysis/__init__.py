"""Analysis of recorded runs: sweeps, the Pareto frontier, plots and the HTML report."""
