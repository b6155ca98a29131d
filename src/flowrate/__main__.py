"""`python -m flowrate …` runs the command line: what torchrun launches with `-m flowrate run …`."""

from flowrate.cli.main import main

if __name__ == "__main__":
    main()
