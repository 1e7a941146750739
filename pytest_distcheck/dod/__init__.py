"""Definition-of-Done bookkeeping: how a check reports its state, and the table at the end of a run."""
