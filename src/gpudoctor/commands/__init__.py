"""One module per subcommand. Each has ``add_arguments(parser)`` and ``run(args) -> int``.

Only ``gpudoctor.cli`` imports these; they import the core and the views they need, lazily where
the import is heavy (textual only for the dashboard).
"""
