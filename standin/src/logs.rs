//! stub
use crate::error::{ApiError, ApiResult};
use crate::reply::{Query, Resp};
use crate::state::Shared;
pub fn handle(_sh: &Shared, _ns: &str, _n: &str, _q: &Query) -> ApiResult<Resp> {
    Err(ApiError::no_route())
}
