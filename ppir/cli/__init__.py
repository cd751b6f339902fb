"""The ``ppir`` command line: :func:`main` and one module per subcommand (``NAME``, ``HELP``,
``DESCRIPTION``, ``add_arguments(parser)``, ``run(args) -> int``)."""

from ppir.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
