//! stub
use crate::error::{ApiError, ApiResult};
use crate::reply::Resp;
use crate::state::Shared;
use std::sync::Arc;
pub async fn handle(
    _sh: Arc<Shared>,
    _r: http::Request<hyper::body::Incoming>,
    _t: &crate::route::Target,
    _n: &str,
) -> ApiResult<Resp> {
    Err(ApiError::no_route())
}
