//! The load worker's control protocol, both halves' one truth: `archbench agent` serves it
//! (`cli::cmd::agent`), `k8s load --in-cluster` speaks it through the API server's pod proxy
//! (`k8s::distributed`). Plain HTTP/1.1 on the pod's own address; POSTs carry the Job's
//! token.

/// The port of the workers' control endpoint (on the pod's own address).
pub const CONTROL_PORT: u16 = 9090;
/// The environment variable carrying a Job's control token into its workers.
pub const TOKEN_ENV: &str = "ARCHBENCH_CONTROL_TOKEN";
/// The header the controller sends the token in.
pub const TOKEN_HEADER: &str = "x-archbench-token";
/// The prefix of a worker's result line in its log.
pub const RESULT_PREFIX: &str = "archbench-result: ";

/// `GET`: answers `ready I/N` once the worker listens and its plan is valid.
pub const READY: &str = "/ready";
/// `POST` with an RFC 3339 instant as the body: the worker starts then.
pub const START: &str = "/start";
/// `POST`: the worker ends its run now, with what it measured.
pub const STOP: &str = "/stop";
/// `GET`: the result document once done (503 before).
pub const RESULT: &str = "/result";

/// The answer to `GET /ready` of worker `index` of `count`.
pub fn ready_answer(index: u32, count: u32) -> String {
    format!("ready {index}/{count}\n")
}

/// Whether a `GET /ready` answer says the worker is ready.
pub fn is_ready(answer: &str) -> bool {
    answer.starts_with("ready ")
}
