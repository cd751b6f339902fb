"""ppir's backends, installed as ``ppir.backends``: leaves that receive a compiled program.

* :mod:`.cost` prints the estimate (step time, bubble, memory), traces and charts;
* :mod:`.cuda` writes per-rank execution plans and runs them with torch.distributed;
* :mod:`.torch_csv` writes torch.distributed.pipelining's schedule CSV.

Each is registered under the ``ppir.backends`` entry-point group (see :mod:`ppir.plugins`);
nothing in ``ppir`` imports this package.
"""
