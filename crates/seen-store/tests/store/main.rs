//! Integration tests of seen-store: one binary, one module per concern.

mod basics;
mod crash;
mod faults;
mod props;
