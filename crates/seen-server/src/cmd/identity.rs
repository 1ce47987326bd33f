//! What the server says it is: the Redis version it answers as and the
//! RedisBloom module it stands in for (`HELLO`, `INFO`, `MODULE LIST`).

use seen_resp::Reply;

/// The Redis version seen reports: the one whose replies it reproduces
/// (RedisBloom 2.8 ran on Redis 7.0 when the reference transcripts were
/// recorded). Clients use it to pick features.
pub(crate) const REDIS_VERSION: &str = "7.0.15";

/// The RedisBloom version seen answers as (2.8.20, in RedisBloom's
/// encoding).
pub(crate) const BF_MODULE_VERSION: i64 = 20820;

/// The `bf` module seen stands in for (`MODULE LIST`, `HELLO`), so that
/// clients that look for RedisBloom find it.
pub(crate) fn bf_module() -> Reply {
    Reply::Map(vec![
        (Reply::bulk("name"), Reply::bulk("bf")),
        (Reply::bulk("ver"), Reply::Integer(BF_MODULE_VERSION)),
        (Reply::bulk("path"), Reply::bulk("seen")),
        (Reply::bulk("args"), Reply::Array(vec![])),
    ])
}
