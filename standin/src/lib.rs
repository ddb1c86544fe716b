//! A stand-in Kubernetes API server for archbench's tests (no real API server can be installed
//! on these machines): real HTTP on 127.0.0.1, so the real `kube::Client` and the real `kubectl`
//! are exercised.
