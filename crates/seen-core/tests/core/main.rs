//! Integration tests of seen-core: one binary, one module per concern.

mod concurrency;
mod decode;
mod golden;
mod guava;
mod guava_reader;
mod props;
mod redisbloom_vectors;
mod scalable;
mod stats;
