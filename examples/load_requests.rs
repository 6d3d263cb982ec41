//! Writes the load-bench requests: for each sync route, requests of about 25 KB, 200 KB and
//! 1.7 MB (objects of about 1.5 KB with managedFields), into the directory given.
//! Uses the same generators as the criterion benches.

#[path = "../hooks/benches/requests.rs"]
mod requests;

fn main() {
    let dir = std::path::PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "target/load".into()),
    );
    std::fs::create_dir_all(&dir).unwrap();
    type Gen = fn(usize) -> Vec<u8>;
    let gens: [(&str, Gen); 3] = [
        ("app-discovery", requests::app_discovery_sync),
        ("delete-graph", requests::delete_graph_sync),
        ("cert-rotation", |n| requests::cert_rotation_sync(n, true)),
    ];
    for (route, generate) in gens {
        for (label, target) in [
            ("25k", 25_000usize),
            ("200k", 200_000),
            ("1700k", 1_700_000),
        ] {
            // Grow the object count until the request reaches the target size.
            let mut n = 1;
            let mut body = generate(n);
            while body.len() < target {
                n = (n * target / body.len().max(1)).max(n + 1);
                body = generate(n);
            }
            let path = dir.join(format!("{route}-{label}.json"));
            std::fs::write(&path, &body).unwrap();
            println!("{} {} objects {} bytes", path.display(), n, body.len());
        }
    }
}
