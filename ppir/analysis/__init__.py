"""Analyses of the IR: the timeline (estimator, critical path, planning costs), activation
memory and traffic, model shapes and cost configurations, and the tuner.  None of them imports
torch or a backend."""
