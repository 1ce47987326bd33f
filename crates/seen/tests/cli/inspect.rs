use serde_json::Value;

use crate::support::*;

fn inspect_json(args: &[&str]) -> (Value, Option<i32>) {
    let mut a = vec!["inspect", "--json"];
    a.extend_from_slice(args);
    let o = run(&a, b"");
    assert!(o.status.code() != Some(2), "{}", stderr(&o));
    (serde_json::from_slice(&o.stdout).unwrap(), o.status.code())
}

#[test]
fn state_file() {
    let dir = tempfile::tempdir().unwrap();
    let st = dir.path().join("u.seen");
    let (lines, distinct) = urls(30_000, 0.2, 2);
    let o = run(
        &[
            "dedup",
            "--capacity",
            "100k",
            "--fpp",
            "1e-3",
            "--state",
            st.to_str().unwrap(),
        ],
        &joined(&lines),
    );
    let unique = out_lines(&o).len();
    let (v, code) = inspect_json(&[st.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert_eq!(v["kind"], "bloom");
    assert_eq!(v["layout"], "blocked");
    assert_eq!(v["capacity"], 100_000);
    assert_eq!(v["error_rate"], 1e-3);
    assert_eq!(v["items"], unique);
    let est = v["estimated_items"].as_f64().unwrap();
    assert!(
        (est - distinct as f64).abs() < distinct as f64 * 0.03,
        "{est} vs {distinct}"
    );
    assert!(v["current_fpp"].as_f64().unwrap() < 1e-3);
    assert_eq!(v["over_capacity"], false);
    assert_eq!(v["file_bytes"], std::fs::metadata(&st).unwrap().len());
    let o = run(&["inspect", st.to_str().unwrap()], b"");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("fill_ratio:") && text.contains("layout:"),
        "{text}"
    );

    // Over capacity: --check fails with 1.
    let small = dir.path().join("small.seen");
    run(
        &[
            "dedup",
            "--capacity",
            "1000",
            "--fpp",
            "0.01",
            "--state",
            small.to_str().unwrap(),
        ],
        &joined(&lines),
    );
    let (v, code) = inspect_json(&["--check", small.to_str().unwrap()]);
    assert_eq!(v["over_capacity"], true);
    assert_eq!(code, Some(1));
    let (_, code) = inspect_json(&["--check", st.to_str().unwrap()]);
    assert_eq!(code, Some(0));
}

#[test]
fn snapshot_of_a_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store =
            seen_store::Store::open(dir.path(), seen_store::StoreOptions::default()).unwrap();
        let spec = seen_store::FilterSpec::Bloom {
            capacity: 10_000,
            error_rate: 0.01,
            layout: seen_core::Layout::Blocked,
        };
        store.create(b"crawl", &spec).unwrap();
        let items: Vec<Vec<u8>> = (0..500).map(|i| format!("u{i}").into_bytes()).collect();
        let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
        store.add(b"crawl", &refs, None).unwrap();
        store.checkpoint().unwrap();
    }
    let snaps: Vec<_> = std::fs::read_dir(dir.path().join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "snap"))
        .collect();
    assert_eq!(snaps.len(), 1, "{snaps:?}");
    let (v, code) = inspect_json(&[snaps[0].to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert_eq!(v["source"], "seen serve snapshot");
    assert_eq!(v["name"], "crawl");
    assert_eq!(v["items"], 500);
    assert_eq!(v["capacity"], 10_000);
    assert!(v["lsn"].as_u64().unwrap() > 0);

    let o = run(&["inspect", dir.path().to_str().unwrap()], b"");
    assert_error(&o, "is a directory");
    let mut bytes = std::fs::read(&snaps[0]).unwrap();
    let n = bytes.len();
    bytes[n - 40] ^= 1;
    let bad = dir.path().join("bad.snap");
    write_file(&bad, &bytes);
    assert_error(&run(&["inspect", bad.to_str().unwrap()], b""), "bad.snap");
}

#[test]
fn bad_paths() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("notes.txt");
    write_file(&f, b"hello world");
    assert_error(
        &run(&["inspect", f.to_str().unwrap()], b""),
        "not a seen filter",
    );
    let missing = dir.path().join("missing.seen");
    assert_error(
        &run(&["inspect", missing.to_str().unwrap()], b""),
        "missing.seen",
    );
    assert_error(&run(&["inspect"], b""), "PATH");
}
