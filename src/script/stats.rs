//! The statistics objects done() receives: latency (µs) and requests per second per thread,
//! with wrk's min, max, mean, stdev, percentile(p), (i) and #.

use hdrhistogram::Histogram;
use mlua::{AnyUserData, MetaMethod, UserData, UserDataMethods, Value};

pub(super) struct Stats {
    pub name: &'static str,
    pub histogram: Histogram<u64>,
}

impl Stats {
    fn figure(&self, f: impl Fn(&Histogram<u64>) -> f64) -> f64 {
        if self.histogram.is_empty() {
            0.0
        } else {
            f(&self.histogram)
        }
    }

    /// The distinct values recorded, lowest first, with their counts.
    fn values(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.histogram.iter_recorded().map(|v| {
            (
                self.histogram.highest_equivalent(v.value_iterated_to()),
                v.count_at_value(),
            )
        })
    }
}

impl UserData for Stats {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method(MetaMethod::Index, |lua, this, key: String| {
            let n = |x: f64| Ok(Value::Number(x));
            match key.as_str() {
                "min" => n(this.figure(|h| h.min() as f64)),
                "max" => n(this.figure(|h| h.max() as f64)),
                "mean" => n(this.figure(Histogram::mean)),
                "stdev" => n(this.figure(Histogram::stdev)),
                "percentile" => Ok(Value::Function(lua.create_function(
                    |_, (ud, p): (AnyUserData, f64)| {
                        let this = ud.borrow::<Stats>()?;
                        let q = (p / 100.0).clamp(0.0, 1.0);
                        Ok(this.figure(|h| h.value_at_quantile(q) as f64))
                    },
                )?)),
                other => Err(mlua::Error::RuntimeError(format!(
                    "{} has no field '{other}' (wrk's statistics have min, max, mean, stdev, percentile)",
                    this.name
                ))),
            }
        });
        // stats(i): the i-th distinct value (from 1) and how often it was seen.
        methods.add_meta_method(MetaMethod::Call, |_, this, i: f64| {
            let at = (i as usize).saturating_sub(1);
            Ok(this
                .values()
                .nth(at)
                .map_or((0.0, 0.0), |(v, c)| (v as f64, c as f64)))
        });
        methods.add_meta_method(MetaMethod::Len, |_, this, ()| Ok(this.values().count()));
    }
}
