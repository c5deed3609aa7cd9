//! Interleaving explorer (placeholder until its issue lands): runs a simulation under controlled
//! schedulers and searches the interleavings for invariant violations.
