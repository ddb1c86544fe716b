//! `k8s login`: a shell in a pod (a terminal in raw mode, window size followed; bash where
//! the image has it, else sh), or one command with its exit code — `kubectl exec -it`
//! without remembering pod names.

use std::io::IsTerminal;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{AttachParams, AttachedProcess, TerminalSize};
use kube::{Api, ResourceExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::client::api_error;
use super::pods::{exit_code, pick, CONTAINER};
use super::{Cluster, K8sError};

/// Puts the terminal on fd 0 in raw mode until dropped (also on panic and early return).
struct RawTerminal {
    saved: libc::termios,
}

impl RawTerminal {
    fn enter() -> Option<RawTerminal> {
        // SAFETY: tcgetattr/tcsetattr on fd 0 with a termios we own.
        unsafe {
            let mut saved: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &mut saved) != 0 {
                return None;
            }
            let mut raw = saved;
            libc::cfmakeraw(&mut raw);
            if libc::tcsetattr(0, libc::TCSANOW, &raw) != 0 {
                return None;
            }
            Some(RawTerminal { saved })
        }
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        // SAFETY: restores the attributes read in `enter`.
        unsafe { libc::tcsetattr(0, libc::TCSANOW, &self.saved) };
    }
}

/// The terminal's size, if stdout is one.
fn window_size() -> Option<TerminalSize> {
    // SAFETY: TIOCGWINSZ writes a winsize we own.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        (libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_col > 0).then_some(TerminalSize {
            width: ws.ws_col,
            height: ws.ws_row,
        })
    }
}

/// Runs `command` (or a login shell) in the variant's pod; returns the exit code to exit with.
pub async fn login(
    cluster: &Cluster,
    variant: &str,
    pod: Option<&str>,
    command: &[String],
) -> Result<i32, K8sError> {
    let pod = pick(cluster, variant, pod).await?;
    let name = pod.name_any();
    let interactive = command.is_empty();
    let tty = interactive && std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let argv: Vec<String> = if interactive {
        vec![
            "sh".into(),
            "-c".into(),
            "command -v bash >/dev/null 2>&1 && exec bash -l || exec sh -l".into(),
        ]
    } else {
        command.to_vec()
    };
    let params = AttachParams {
        container: Some(CONTAINER.into()),
        stdin: interactive,
        stdout: true,
        stderr: !tty,
        tty,
        ..AttachParams::default()
    };
    let api: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let mut process = api
        .exec(&name, argv, &params)
        .await
        .map_err(|e| api_error(e, "create", "pods/exec"))?;
    let _raw = if tty { RawTerminal::enter() } else { None };
    if tty {
        follow_window(&mut process).await;
    }
    forward_stdin(&mut process);
    let output = copy_output(&mut process);
    let status = match process.take_status() {
        Some(s) => s.await,
        None => None,
    };
    for task in output {
        let _ = task.await;
    }
    exit_code(status.as_ref()).map_err(|message| K8sError::Failed {
        what: format!("exec in {name}"),
        message,
    })
}

/// Tells the pod's terminal our window's size, now and whenever it changes.
async fn follow_window(process: &mut AttachedProcess) {
    let (Some(mut sizes), Some(size)) = (process.terminal_size(), window_size()) else {
        return;
    };
    use futures::SinkExt;
    let _ = sizes.send(size).await;
    // Follow the window as it changes.
    tokio::spawn(async move {
        let Ok(mut winch) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
        else {
            return;
        };
        while winch.recv().await.is_some() {
            if let Some(size) = window_size() {
                if sizes.send(size).await.is_err() {
                    return;
                }
            }
        }
    });
}

/// Our stdin to the pod's, when it takes one, until either ends.
fn forward_stdin(process: &mut AttachedProcess) {
    if let Some(mut to_pod) = process.stdin() {
        tokio::spawn(async move {
            let mut input = tokio::io::stdin();
            let mut buf = [0u8; 4096];
            while let Ok(n) = input.read(&mut buf).await {
                if n == 0 || to_pod.write_all(&buf[..n]).await.is_err() {
                    break;
                }
                let _ = to_pod.flush().await;
            }
            let _ = to_pod.shutdown().await;
        });
    }
}

/// The pod's stdout and stderr to ours: the tasks copying them, to await before exiting.
fn copy_output(process: &mut AttachedProcess) -> Vec<tokio::task::JoinHandle<()>> {
    let out = process.stdout().map(|mut r| {
        tokio::spawn(async move {
            let mut stdout = tokio::io::stdout();
            let _ = tokio::io::copy(&mut r, &mut stdout).await;
            let _ = stdout.flush().await;
        })
    });
    let err = process.stderr().map(|mut r| {
        tokio::spawn(async move {
            let mut stderr = tokio::io::stderr();
            let _ = tokio::io::copy(&mut r, &mut stderr).await;
        })
    });
    [out, err].into_iter().flatten().collect()
}
