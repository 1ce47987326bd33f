//! Measures the classic layout's false-positive rate against the textbook
//! formula for small arrays (the double-hashing floor).
use seen_core::{BloomFilter, Layout};
fn main() {
    for (bits, n) in [
        (19200u64, 1000u64),
        (4096, 200),
        (65536, 3400),
        (262144, 13600),
    ] {
        let k = 13;
        let fillings = 20_000_000 / bits;
        let probes_per = 20_000u64;
        let mut fps = 0u64;
        for r in 0..fillings {
            let mut f =
                BloomFilter::with_size(Layout::Classic, bits, k, 0, n, 0.5, u64::MAX).unwrap();
            for i in 0..n {
                f.add_mut(((r << 40) + i).to_le_bytes());
            }
            fps += (0..probes_per)
                .filter(|j| f.contains(((1u64 << 63) + (r << 40) + j).to_le_bytes()))
                .count() as u64;
        }
        let measured = fps as f64 / (fillings * probes_per) as f64;
        let model = seen_core::sizing::classic_fpp(bits, k, n);
        println!(
            "m={bits} n={n} k={k}: measured {measured:.3e} model {model:.3e} excess*m = {:.3}",
            (measured - model) * bits as f64
        );
    }
}
