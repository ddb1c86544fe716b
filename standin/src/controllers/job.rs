//! stub
use crate::state::Shared;
pub fn sync(_sh: &Shared) {}
