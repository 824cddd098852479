//! Which commands read a model file of each kind, and the one rule for keys that say the
//! same thing twice.
//!
//! Four readers take model files: the linear-Gaussian one (`model::load_model`: every
//! command; `kind = "time-varying"` too where a command takes it), the nonlinear
//! Gaussian family's (`nonlinear::load_nonlinear`: `filter` and `smooth` with a
//! nonlinear file or `--filter`), the particle filter's (`particle::load_pf_model`: `pf`,
//! `simulate`) and the hidden Markov models' (`hmm::load_hmm`: `hmm`). A reader given a file of a family it
//! does not read consults [`foreign`] first, so that the message says which command
//! reads the file instead of naming the first field it does not know.

/// The four readers of model files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Linear-Gaussian models (explicit, cv, ca, random-walk, ar).
    Linear,
    /// The nonlinear Gaussian filters and IMM (nonlinear, ct, the sensor kinds, `[imm]`,
    /// `[filter]`).
    Gaussian,
    /// The particle filter (the sensor kinds, stochastic-volatility, custom).
    Particle,
    /// Hidden Markov models (`[hmm]`).
    Hmm,
}

const LINEAR: [&str; 6] = ["explicit", "cv", "ca", "random-walk", "rw", "ar"];
const GAUSSIAN_ONLY: [&str; 2] = ["nonlinear", "ct"];
const SENSORS: [&str; 3] = ["range-only", "bearings-only", "range-bearing"];
const PARTICLE_ONLY: [&str; 2] = ["stochastic-volatility", "custom"];

/// The families that read a file with `[model]` kind `kind` (and `[imm]` / `[filter]`
/// tables when `tables`), and the sentence naming their commands; `None` for a kind no
/// reader knows (each reader reports that itself).
fn readers(kind: &str, tables: Option<&str>) -> Option<(&'static [Family], String)> {
    use Family::*;
    if let Some(t) = tables {
        return Some((
            &[Gaussian],
            format!("a nonlinear model file (its [{t}] table): kestrel filter, smooth and track read it"),
        ));
    }
    let k = kind;
    if LINEAR.contains(&k) {
        return Some((
            &[Linear, Gaussian, Particle],
            "a linear-Gaussian model file ([model]): kestrel filter, smooth, loglik, retrodict, simulate, track and pf read it".to_string(),
        ));
    }
    if k == "time-varying" {
        return Some((
            &[Linear],
            "kind = \"time-varying\" is a linear model whose matrices change from step to step: kestrel filter, smooth, loglik, retrodict and simulate read it".to_string(),
        ));
    }
    if GAUSSIAN_ONLY.contains(&k) {
        return Some((
            &[Gaussian],
            format!("kind = \"{k}\" is a nonlinear model: kestrel filter, smooth and track read it (the nonlinear filters, --filter ekf, ukf, ckf or iekf)"),
        ));
    }
    if SENSORS.contains(&k) {
        return Some((
            &[Gaussian, Particle],
            format!("kind = \"{k}\" is a nonlinear model: kestrel filter, smooth and track (the nonlinear filters, --filter ekf, ukf, ckf or iekf), pf and simulate read it"),
        ));
    }
    if PARTICLE_ONLY.contains(&k) {
        return Some((
            &[Particle],
            format!("kind = \"{k}\" is a model for the particle filter: kestrel pf and simulate read it"),
        ));
    }
    None
}

/// When the TOML `text` is a model file that `reader` does not read, the message saying
/// which commands do (`None` when it reads it, or when the text is not TOML or its kind
/// unknown: the reader's own parser reports those).
pub fn foreign(text: &str, reader: Family) -> Option<String> {
    let root = text.parse::<toml::Table>().ok()?;
    if root.contains_key("hmm") && !root.contains_key("model") {
        return (reader != Family::Hmm)
            .then(|| {
                "an [hmm] model file (a hidden Markov model): kestrel hmm reads it".to_string()
            })
            .map(|who| format!("{who}; {}", needs(reader)));
    }
    let tables = ["imm", "filter"]
        .into_iter()
        .find(|t| root.contains_key(*t));
    let kind = match root.get("model").and_then(|m| m.get("kind")) {
        Some(k) => k.as_str()?,
        None if root.contains_key("model") => "explicit",
        None if tables.is_some() => "explicit",
        None => return None,
    };
    let (families, who) = readers(kind, tables)?;
    if families.contains(&reader) {
        return None;
    }
    Some(format!("{who}; {}", needs(reader)))
}

/// What `reader` reads, after the sentence saying who reads the file.
fn needs(reader: Family) -> &'static str {
    match reader {
        Family::Linear => {
            "this command needs a linear-Gaussian model (explicit, cv, ca, random-walk or ar)"
        }
        Family::Gaussian => "the Gaussian filters do not",
        Family::Particle => "the particle filter does not",
        Family::Hmm => {
            "kestrel hmm needs an [hmm] model file (transition, initial, [hmm.emission])"
        }
    }
}

/// The one rule for two keys that say the same thing two ways (`P0`, the matrix, and
/// `p0`, the scale of the identity): both present is an error, never a silent choice.
/// Returns the message naming both keys (the caller names the file and section).
pub fn conflict(a: (&str, bool), b: (&str, bool)) -> Option<String> {
    (a.1 && b.1).then(|| {
        format!(
            "{} and {} both given (both set the same thing): give one",
            a.0, b.0
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reader_names_where_a_foreign_file_belongs() {
        let sv = "[model]\nkind = \"stochastic-volatility\"\nmu = -1.0\n";
        let m = foreign(sv, Family::Linear).unwrap();
        assert!(m.contains("kestrel pf"), "{m}");
        assert!(foreign(sv, Family::Gaussian)
            .unwrap()
            .contains("kestrel pf"));
        assert!(foreign(sv, Family::Particle).is_none());
        let ro = "[model]\nkind = \"range-only\"\nsensors = [[0.0, 0.0]]\n";
        assert!(foreign(ro, Family::Linear).unwrap().contains("--filter"));
        assert!(foreign(ro, Family::Gaussian).is_none());
        let f = "[model]\nF = [[1.0]]\n[filter]\nkind = \"ukf\"\n";
        assert!(foreign(f, Family::Linear).unwrap().contains("[filter]"));
        assert!(foreign("[model]\nkind = \"cv\"\n", Family::Linear).is_none());
        assert!(foreign("[model]\nkind = \"warp\"\n", Family::Linear).is_none());
        // Time-varying files: the linear reader's alone; hmm files: kestrel hmm's alone.
        let tv = "[model]\nkind = \"time-varying\"\nfile = \"s.npz\"\n";
        assert!(foreign(tv, Family::Linear).is_none());
        for r in [Family::Gaussian, Family::Particle, Family::Hmm] {
            let m = foreign(tv, r).unwrap();
            assert!(
                m.contains("time-varying") && m.contains("kestrel filter"),
                "{m}"
            );
        }
        let hmm = "[hmm]\ntransition = [[1.0]]\ninitial = [1.0]\n";
        assert!(foreign(hmm, Family::Hmm).is_none());
        for r in [Family::Linear, Family::Gaussian, Family::Particle] {
            assert!(foreign(hmm, r).unwrap().contains("kestrel hmm reads it"));
        }
        let m = foreign("[model]\nkind = \"cv\"\n", Family::Hmm).unwrap();
        assert!(m.contains("kestrel filter") && m.contains("[hmm]"), "{m}");
    }

    #[test]
    fn two_keys_for_one_thing_conflict() {
        assert!(conflict(("P0", true), ("p0", false)).is_none());
        let m = conflict(("P0", true), ("p0", true)).unwrap();
        assert!(m.contains("P0") && m.contains("p0"), "{m}");
    }
}
