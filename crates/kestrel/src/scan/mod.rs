//! The associative scan engine (placeholder).

use std::str::FromStr;

/// Scan algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ScanAlgorithm {
    Sequential,
    HillisSteele,
    Blelloch,
    LadnerFischer,
    /// Sengupta et al.'s hybrid with its parameter N.
    Sengupta(usize),
    /// The fastest available on the device (the default).
    #[default]
    Fastest,
}

impl FromStr for ScanAlgorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "sequential" => ScanAlgorithm::Sequential,
            "hillis-steele" => ScanAlgorithm::HillisSteele,
            "blelloch" => ScanAlgorithm::Blelloch,
            "ladner-fischer" => ScanAlgorithm::LadnerFischer,
            "fastest" | "default" => ScanAlgorithm::Fastest,
            _ => match s.strip_prefix("sengupta") {
                Some("") => ScanAlgorithm::Sengupta(256),
                Some(n) => ScanAlgorithm::Sengupta(
                    n.trim_start_matches([':', '=']).parse().map_err(|_| format!("bad Sengupta parameter in \"{s}\""))?,
                ),
                None => return Err(format!(
                    "unknown scan algorithm \"{s}\" (expected sequential, hillis-steele, blelloch, ladner-fischer, sengupta[:N] or fastest)"
                )),
            },
        })
    }
}
