//! Writes N synthetic worker results (what N pods of `k8s load --in-cluster` print) for
//! bench/merge-scale.sh: `synthetic_results N REQUESTS_PER_WORKER DIR`.

#[path = "../tests/util/synthetic.rs"]
mod synthetic;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [n, requests, dir] = args.as_slice() else {
        return Err("usage: synthetic_results N REQUESTS_PER_WORKER DIR".into());
    };
    let (n, requests): (u32, u64) = (n.parse()?, requests.parse()?);
    std::fs::create_dir_all(dir)?;
    for i in 0..n {
        let r = synthetic::worker_result(i, n, requests, 60, u64::from(i));
        std::fs::write(format!("{dir}/worker-{i}.json"), serde_json::to_vec(&r)?)?;
    }
    Ok(())
}
