"""Schedule construction by list scheduling (the zero-bubble heuristic family).

* :mod:`.greedy`: the engine (event-driven simulation with priorities and a memory cap);
* :mod:`.block`: ``program r greedy { ... }`` blocks of the .pps language;
* :mod:`.search`: ``ppir synth``: the fastest verified candidate within a memory cap;
* :mod:`.timing`: compute-graph ASAP timing of items (overlapped steps as one op).
"""
