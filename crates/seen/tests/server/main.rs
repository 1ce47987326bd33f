//! `seen serve` tested as users run it: the real binary over TCP, with
//! raw RESP, redis-cli, redis-benchmark, redis-py and the `redis` crate.

mod auth;
mod clients;
mod drop_in;
mod limits;
mod memory;
mod metrics;
mod protocol;
mod restart;
mod settings;
mod support;
mod vectors;
