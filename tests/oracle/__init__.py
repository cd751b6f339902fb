"""Test oracles: ppir's former rendezvous and timed-simulation engines (work-list over
program units), kept only to cross-check the graph IR's verifier and timeline.  Never imported
by ppir."""
