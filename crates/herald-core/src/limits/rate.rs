//! One rate limit as configured: how many events per period, with what burst, or off. Written
//! and read as text (`"100/s"`, `"10/min burst 20"`, `"off"`) in the config file, the
//! environment and an app's limits; a bare number `N` is `N/s` with a burst of `N`, and `0`
//! is off.

use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::time::Duration;

use governor::Quota;

/// A rate limit: `count` events per `period_secs`, up to `burst` at once; `count == 0` is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    count: u32,
    period_secs: u32,
    burst: u32,
}

impl Rate {
    /// No limit.
    pub const OFF: Rate = Rate {
        count: 0,
        period_secs: 1,
        burst: 0,
    };

    /// `count` per second with a burst of `burst` (`count == 0` is off; a burst below 1 is 1).
    pub const fn per_second(count: u32, burst: u32) -> Rate {
        Rate::new(count, 1, burst)
    }

    /// `count` per `period_secs` seconds with a burst of `burst`.
    pub const fn new(count: u32, period_secs: u32, burst: u32) -> Rate {
        if count == 0 || period_secs == 0 {
            return Rate::OFF;
        }
        Rate {
            count,
            period_secs,
            burst: if burst == 0 { 1 } else { burst },
        }
    }

    /// Whether this limit is off.
    pub fn is_off(&self) -> bool {
        self.count == 0
    }

    /// Events allowed at once, from a full bucket.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// The time one event's allowance takes to come back.
    pub fn interval(&self) -> Duration {
        Duration::from_secs(u64::from(self.period_secs)) / self.count.max(1)
    }

    /// The governor quota of this rate; `None` when off.
    pub fn quota(&self) -> Option<Quota> {
        if self.is_off() {
            return None;
        }
        let burst = NonZeroU32::new(self.burst)?;
        Some(Quota::with_period(self.interval().max(Duration::from_nanos(1)))?.allow_burst(burst))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_off() {
            return f.write_str("off");
        }
        let unit = match self.period_secs {
            1 => "s".to_string(),
            60 => "min".to_string(),
            3600 => "h".to_string(),
            n => format!("{n}s"),
        };
        write!(f, "{}/{unit} burst {}", self.count, self.burst)
    }
}

/// Why a rate does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not a rate: write \"off\", 0, a number per second, or e.g. \"100/s\", \
     \"10/min burst 20\", \"1000/h\""
)]
pub struct RateParseError(String);

impl FromStr for Rate {
    type Err = RateParseError;

    fn from_str(text: &str) -> Result<Rate, RateParseError> {
        let bad = || RateParseError(text.to_string());
        let t = text.trim();
        if t.eq_ignore_ascii_case("off") {
            return Ok(Rate::OFF);
        }
        let (rate, burst) = match t.split_once("burst") {
            Some((rate, burst)) => {
                let burst: u32 = burst.trim().parse().map_err(|_| bad())?;
                if burst == 0 {
                    return Err(bad());
                }
                (rate.trim().trim_end_matches(',').trim(), Some(burst))
            }
            None => (t, None),
        };
        let (count, period_secs) = match rate.split_once('/') {
            Some((count, unit)) => {
                let period = match unit.trim() {
                    "s" | "sec" | "second" => 1,
                    "m" | "min" | "minute" => 60,
                    "h" | "hour" => 3600,
                    _ => return Err(bad()),
                };
                (count.trim().parse::<u32>().map_err(|_| bad())?, period)
            }
            None => (rate.parse::<u32>().map_err(|_| bad())?, 1),
        };
        if count == 0 {
            return if burst.is_none() {
                Ok(Rate::OFF)
            } else {
                Err(bad())
            };
        }
        Ok(Rate::new(count, period_secs, burst.unwrap_or(count)))
    }
}

impl serde::Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Rate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Written {
            Number(u32),
            Text(String),
        }
        match Written::deserialize(d)? {
            Written::Number(n) => Ok(Rate::per_second(n, n)),
            Written::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_in_every_written_form() {
        let cases = [
            ("off", Rate::OFF),
            ("0", Rate::OFF),
            ("OFF", Rate::OFF),
            ("100", Rate::per_second(100, 100)),
            ("100/s", Rate::per_second(100, 100)),
            ("10/min burst 20", Rate::new(10, 60, 20)),
            ("10/min, burst 20", Rate::new(10, 60, 20)),
            ("1000/h", Rate::new(1000, 3600, 1000)),
            (" 5/s burst 1 ", Rate::per_second(5, 1)),
        ];
        for (text, rate) in cases {
            assert_eq!(text.parse::<Rate>(), Ok(rate), "{text}");
            assert_eq!(rate.to_string().parse::<Rate>(), Ok(rate), "{rate}");
        }
        for bad in [
            "",
            "-1",
            "ten",
            "5/day",
            "5/s burst 0",
            "0/s burst 3",
            "5/s burst x",
        ] {
            assert!(bad.parse::<Rate>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rates_read_from_json_numbers_and_text() {
        let r: Rate = serde_json::from_str("3").unwrap();
        assert_eq!(r, Rate::per_second(3, 3));
        let r: Rate = serde_json::from_str("\"2/s burst 4\"").unwrap();
        assert_eq!(serde_json::to_string(&r).unwrap(), "\"2/s burst 4\"");
        assert!(serde_json::from_str::<Rate>("\"fast\"").is_err());
    }

    #[test]
    fn a_quota_exists_only_when_on() {
        assert!(Rate::OFF.quota().is_none());
        let q = Rate::per_second(10, 20).quota().unwrap();
        assert_eq!(q.burst_size().get(), 20);
        assert_eq!(q.replenish_interval(), Duration::from_millis(100));
    }
}
