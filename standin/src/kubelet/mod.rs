//! stub
use crate::options::Options;
use crate::state::Shared;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
pub struct Kubelet;
impl Kubelet {
    pub fn new(_dir: &Path, _o: &Options) -> std::io::Result<Kubelet> {
        Ok(Kubelet)
    }
    pub fn sync(&self, _sh: &Arc<Shared>) {}
    pub fn kill(&self, _ns: &str, _pod: &str) -> std::io::Result<()> {
        Ok(())
    }
    pub fn current_log(&self, _ns: &str, _pod: &str, _c: Option<&str>) -> Option<String> {
        None
    }
    pub fn shutdown(&self, _d: Duration) {}
    pub fn cleanup(&self) {}
}
