//! The false-positive rate measured on a real redis-server, seeded.

use seen_redis::{FilterParams, RedisFilter};

use crate::server::RedisServer;
use crate::{target, urls};

#[test]
fn measured_false_positive_rate_meets_the_rate_asked() {
    let server = RedisServer::start();
    let t = target(&server.url());
    for (capacity, rate, shard) in [(100_000u64, 0.01, None), (50_000, 0.001, Some(16_384u64))] {
        let mut params = FilterParams::new(capacity, rate);
        params.max_shard_bytes = shard;
        let name = format!("fpp-{rate}");
        let mut f = RedisFilter::open_or_create(&t, &name, &params).unwrap();
        let members = urls(&name, capacity as usize);
        f.add_many(&members).unwrap();
        assert!(
            f.contains_many(&members).unwrap().iter().all(|&p| p),
            "false negative"
        );
        let probes = urls(&format!("{name}-absent"), 400_000);
        let fp = f
            .contains_many(&probes)
            .unwrap()
            .iter()
            .filter(|&&p| p)
            .count();
        let measured = fp as f64 / probes.len() as f64;
        let plan = f.metadata().plan;
        let model = seen_core::sizing::blocked_fpp(plan.blocks(), plan.hashes, capacity);
        assert!(model <= rate, "{model}");
        // 400,000 probes: the binomial noise is under 4% of the mean at
        // these rates; allow 15% above the rate asked.
        assert!(
            measured <= rate * 1.15,
            "{name}: measured {measured}, asked {rate}"
        );
        assert!(
            measured >= model * 0.7,
            "{name}: measured {measured}, model {model}"
        );
        let info = f.info().unwrap();
        assert!(
            (info.current_fpp - model).abs() < model * 0.2,
            "{} vs {model}",
            info.current_fpp
        );
    }
}
