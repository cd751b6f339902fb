"""Peers' schedule logic ported into tests as references (never imported by ppir itself).

Each module names the repository, file and commit it was ported from; the ports keep the
peers' own structure (their loops, counters and tie-breaks), so a disagreement with ppir's
.pps built-ins points at one of the two rather than at a shared re-derivation.
"""
