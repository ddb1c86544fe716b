//! stub
use crate::reply::{Query, Resp};
use crate::state::Shared;
use std::sync::Arc;
pub fn handle(
    _sh: Arc<Shared>,
    _r: http::Request<hyper::body::Incoming>,
    _ns: &str,
    _n: &str,
    _q: &Query,
) -> Resp {
    crate::reply::error(&crate::error::ApiError::no_route())
}
