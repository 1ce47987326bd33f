//! Times allocating, encoding and decoding a 1 GiB filter.
use std::time::Instant;
fn main() {
    let n = 850_000_000u64;
    let t = Instant::now();
    let f = seen_core::BloomFilter::new(n, 0.01).unwrap();
    println!("alloc {} MiB: {:?}", f.memory_bytes() >> 20, t.elapsed());
    let path = std::env::temp_dir().join("big_io.seen");
    let t = Instant::now();
    let mut w = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    f.encode(&mut w).unwrap();
    drop(w);
    println!("encode to file: {:?}", t.elapsed());
    let t = Instant::now();
    let r = std::io::BufReader::new(std::fs::File::open(&path).unwrap());
    let g = seen_core::BloomFilter::decode(r, &Default::default()).unwrap();
    println!("decode from file: {:?}", t.elapsed());
    let t = Instant::now();
    let _ = std::fs::read(&path).unwrap();
    println!("plain read of the file: {:?}", t.elapsed());
    drop((f, g));
    std::fs::remove_file(path).unwrap();
}
