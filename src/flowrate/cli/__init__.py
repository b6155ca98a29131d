"""The `flowrate` command: one thin module per subcommand; cli.console owns all terminal output."""
