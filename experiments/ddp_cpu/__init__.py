"""Phase 35 lab 1: DDP on CPU with 2 gloo processes, all-reduce time logged."""
