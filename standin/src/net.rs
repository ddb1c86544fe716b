//! stub
#[derive(Default)]
pub struct ServiceNet {}
