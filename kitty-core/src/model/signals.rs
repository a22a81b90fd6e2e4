//! `Signals`: the values of typed signals at one tick. Only finite values
//! get in (a NaN or infinity offered by any source is dropped, so a frame
//! always serializes and reads back). Serialized as `{name: value}`; names a
//! reader does not know (a newer kitty wrote them) are skipped, not errors.
//! Kept as a vector sorted by signal (the order a map would give): a rank
//! holds a few dozen values, which one allocation holds where a B-tree
//! took several nodes, and a frame has hundreds of these.

use super::signal::Sig;
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Signals(Vec<(Sig, f64)>);

impl Signals {
    pub fn new() -> Self {
        Signals::default()
    }

    /// Room for `n` values in one allocation (a socket's ten: grown from
    /// empty they took three, 4 % of a tick of 8 ranks of 64 sockets).
    pub fn with_capacity(n: usize) -> Self {
        Signals(Vec::with_capacity(n))
    }

    /// Sets a value; returns false (and keeps nothing) when it is not finite.
    pub fn set(&mut self, sig: Sig, v: f64) -> bool {
        if !v.is_finite() {
            return false;
        }
        match self.find(sig) {
            Ok(i) => self.0[i].1 = v,
            // Most sources set their values in signal order: an append.
            Err(i) => self.0.insert(i, (sig, v)),
        }
        true
    }

    /// Sets the value when there is one.
    pub fn set_opt(&mut self, sig: Sig, v: Option<f64>) {
        if let Some(v) = v {
            self.set(sig, v);
        }
    }

    /// Where `sig` is, or where it would go.
    fn find(&self, sig: Sig) -> Result<usize, usize> {
        // The last value first: appends in order find their place at once.
        match self.0.last() {
            None => Err(0),
            Some(&(last, _)) if last < sig => Err(self.0.len()),
            _ => self.0.binary_search_by(|(k, _)| k.cmp(&sig)),
        }
    }

    pub fn get(&self, sig: Sig) -> Option<f64> {
        self.find(sig).ok().map(|i| self.0[i].1)
    }

    pub fn contains(&self, sig: Sig) -> bool {
        self.find(sig).is_ok()
    }

    pub fn remove(&mut self, sig: Sig) -> Option<f64> {
        self.find(sig).ok().map(|i| self.0.remove(i).1)
    }

    /// In signal order.
    pub fn iter(&self) -> impl Iterator<Item = (Sig, f64)> + '_ {
        self.0.iter().copied()
    }

    /// Calls `f` with each signal both have, in signal order: this one's
    /// value (to change in place) and `other`'s. One walk of the two
    /// sorted lists, not a search per signal.
    pub fn each_shared(&mut self, other: &Signals, mut f: impl FnMut(Sig, &mut f64, f64)) {
        let mut mine = self.0.iter_mut().peekable();
        for &(k, theirs) in &other.0 {
            while mine.next_if(|(m, _)| *m < k).is_some() {}
            match mine.peek_mut() {
                Some((m, v)) if *m == k => f(k, v, theirs),
                Some(_) => {}
                None => break,
            }
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = Sig> + '_ {
        self.0.iter().map(|(k, _)| *k)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<(Sig, f64)> for Signals {
    fn from_iter<I: IntoIterator<Item = (Sig, f64)>>(iter: I) -> Self {
        let mut s = Signals::new();
        for (k, v) in iter {
            s.set(k, v);
        }
        s
    }
}

impl serde::Serialize for Signals {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k.name(), v)?;
        }
        m.end()
    }
}

impl<'de> serde::Deserialize<'de> for Signals {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Signals;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of signal names to numbers")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Signals, A::Error> {
                let mut out = Signals::new();
                while let Some(name) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    // A null (a non-finite value written by an old kitty) or
                    // an unknown name is skipped, never fatal.
                    let v: Option<f64> = map.next_value()?;
                    if let (Some(sig), Some(v)) = (Sig::from_name(&name), v) {
                        out.set(sig, v);
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shared_visits_the_signals_both_have_in_order() {
        let all: Vec<Sig> = crate::model::signal::CATALOG
            .iter()
            .map(|i| i.sig)
            .collect();
        let mine: Signals = [(all[1], 1.0), (all[3], 3.0), (all[4], 4.0), (all[7], 7.0)]
            .into_iter()
            .collect();
        let theirs: Signals = [
            (all[0], 0.5),
            (all[3], 30.0),
            (all[5], 50.0),
            (all[7], 70.0),
        ]
        .into_iter()
        .collect();
        let mut mine2 = mine.clone();
        let mut seen = Vec::new();
        mine2.each_shared(&theirs, |k, v, t| {
            seen.push((k, *v, t));
            *v += t;
        });
        assert_eq!(seen, [(all[3], 3.0, 30.0), (all[7], 7.0, 70.0)]);
        assert_eq!(mine2.get(all[3]), Some(33.0));
        assert_eq!(mine2.get(all[7]), Some(77.0));
        assert_eq!(mine2.get(all[1]), Some(1.0));
        // What a search per signal finds, for any two lists.
        let mut none = Signals::new();
        none.each_shared(&theirs, |_, _, _| panic!("nothing shared"));
        let mut by_search = Vec::new();
        for (k, t) in theirs.iter() {
            if let Some(v) = mine.get(k) {
                by_search.push((k, v, t));
            }
        }
        let mut by_walk = Vec::new();
        mine.clone()
            .each_shared(&theirs, |k, v, t| by_walk.push((k, *v, t)));
        assert_eq!(by_walk, by_search);
    }

    #[test]
    fn only_finite_values_get_in() {
        let mut s = Signals::new();
        assert!(s.set(Sig::CpuPct, 3.5));
        assert!(!s.set(Sig::RunDelayMsPerS, f64::NAN));
        assert!(!s.set(Sig::RunDelayMsPerS, f64::INFINITY));
        assert_eq!(s.len(), 1);
        assert_eq!(s.get(Sig::CpuPct), Some(3.5));
    }

    /// Whatever order they are set in, the values come out in signal order,
    /// each once, as a map would give them.
    #[test]
    fn values_stay_in_signal_order() {
        use std::collections::BTreeMap;
        let sigs = [
            Sig::RunDelayMsPerS,
            Sig::CpuPct,
            Sig::Fds,
            Sig::RunqP99Us,
            Sig::CpuPct,
            Sig::RttP50Us,
        ];
        let mut s = Signals::new();
        let mut m = BTreeMap::new();
        for (i, sig) in sigs.into_iter().enumerate() {
            s.set(sig, i as f64);
            m.insert(sig, i as f64);
        }
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            m.clone().into_iter().collect::<Vec<_>>()
        );
        assert_eq!(s.remove(Sig::Fds), m.remove(&Sig::Fds));
        assert_eq!(s.remove(Sig::Fds), None);
        assert_eq!(s.get(Sig::CpuPct), Some(4.0));
        assert!(!s.contains(Sig::Fds) && s.contains(Sig::RttP50Us));
        assert_eq!(
            s.keys().collect::<Vec<_>>(),
            m.keys().copied().collect::<Vec<_>>()
        );
    }

    #[test]
    fn unknown_names_and_nulls_are_skipped_when_read() {
        let s: Signals =
            serde_json::from_str(r#"{"cpu_pct": 2.0, "from_the_future": 1.0, "fds": null}"#)
                .unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![(Sig::CpuPct, 2.0)]);
        assert_eq!(serde_json::to_string(&s).unwrap(), r#"{"cpu_pct":2.0}"#);
    }
}
