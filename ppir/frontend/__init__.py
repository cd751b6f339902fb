"""The front end: ``.pps`` text (Lark) to an AST, expanded for parameter values into per-rank
programs; torch CSV files and torch's built-in classes read into the same IR.

:func:`load_schedule` (:mod:`.loader`) resolves any schedule argument: a ``.pps`` path, a torch
``.csv`` path, a built-in name, or ``torch:NAME``.
"""
