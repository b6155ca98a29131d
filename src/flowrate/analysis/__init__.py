"""Analysis of recorded runs: the Pareto frontier, grouping, comparisons of recorded runs, history
and steps, the cost model's predictions against measurements, plots and the HTML report. Records
in, figures and pages out: it sits directly above ``results`` and imports nothing that runs a
model, a server or a campaign (the import contract's layers); what it needs priced or run is
passed in (the report's ``reprice``, flowrate.estimate.reprice)."""
