//! Integration tests of seen-store: one binary, one module per concern.

mod basics;
mod checkpoint;
mod concurrent;
mod crash;
mod damage;
mod dumps;
mod faults;
mod faulty;
mod import;
mod power;
mod power_fs;
mod props;
mod races;
mod upgrade;
