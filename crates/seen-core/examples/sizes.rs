//! Prints the blocked layout's sizing for a few error rates.
fn main() {
    for p in [0.1, 0.01, 0.001, 1e-4, 1e-5, 1e-6] {
        let n = 10_000_000;
        let (blocks, k) = seen_core::sizing::blocked_size(n, p).unwrap();
        let bpi = (blocks * 512) as f64 / n as f64;
        let classic = seen_core::sizing::classic_bits_per_item(p).unwrap();
        println!("p={p:e}: blocked {bpi:.2} bits/item k={k}; classic {classic:.2}");
    }
}
