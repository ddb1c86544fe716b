//! stub
use crate::error::{ApiError, ApiResult};
use crate::reply::{Query, Resp};
use crate::state::Shared;
pub fn handle(_sh: &Shared, _t: &crate::route::Target, _q: &Query) -> ApiResult<Resp> {
    Err(ApiError::no_route())
}
