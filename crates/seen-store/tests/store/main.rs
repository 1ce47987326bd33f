//! Integration tests of seen-store: one binary, one module per concern.

mod basics;
mod checkpoint;
mod concurrent;
mod crash;
mod faults;
mod power;
mod props;
mod races;
