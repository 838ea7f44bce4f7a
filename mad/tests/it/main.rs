//! mad's integration tests, one binary: the codecs against generated values, and the
//! engine against the simulated fabric.

mod cables;
mod codecs_proptest;
mod engine_sim;
