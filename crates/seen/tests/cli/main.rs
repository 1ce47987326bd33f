//! Integration tests of the `seen` command line (dedup, calc, inspect),
//! running the real binary.

mod calc;
mod closed_output;
mod dedup;
mod guava;
#[path = "../../../seen-core/tests/java/peer.rs"]
mod guava_peer;
mod inspect;
#[path = "../../../seen-redis/tests/redis/proxy.rs"]
mod proxy;
mod redis;
mod redis_faults;
#[path = "../../../seen-redis/tests/redis/server.rs"]
mod redis_server;
mod support;
mod usecases;
