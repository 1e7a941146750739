"""Phase 35 tensor-parallel inference lab."""
