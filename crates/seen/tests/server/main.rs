//! `seen serve` tested as users run it: the real binary over TCP, with
//! raw RESP, redis-cli, redis-benchmark, redis-py and the `redis` crate.

mod auth;
mod clients;
mod config_file;
mod drop_in;
mod guava;
#[path = "../../../seen-core/tests/java/peer.rs"]
mod guava_peer;
mod limits;
mod memory;
mod metrics;
mod operations;
mod protocol;
mod restart;
mod settings;
mod support;
mod vectors;
