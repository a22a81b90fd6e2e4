//! Small typed ids with stable names (sources, histogram kinds, statuses)
//! and a map keyed by them that reads leniently: an id this kitty does not
//! know (written by a newer one) is skipped, not an error.

use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;

/// An id with a stable snake_case name.
pub trait Named: Copy + Ord + 'static {
    fn name(self) -> &'static str;
    fn from_name(name: &str) -> Option<Self>;
}

/// Declares a fieldless enum with names, `Named`, Display and serde as its name.
#[macro_export]
macro_rules! named_enum {
    ($(#[$m:meta])* $vis:vis enum $E:ident { $( $(#[$vm:meta])* $V:ident = $n:literal ),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $E { $( $(#[$vm])* $V, )* }
        impl $E {
            pub const ALL: &'static [$E] = &[$($E::$V,)*];
            pub const fn name(self) -> &'static str { match self { $($E::$V => $n,)* } }
        }
        impl $crate::model::named::Named for $E {
            fn name(self) -> &'static str { $E::name(self) }
            fn from_name(name: &str) -> Option<Self> { match name { $($n => Some($E::$V),)* _ => None } }
        }
        impl std::fmt::Display for $E {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str(self.name()) }
        }
        impl serde::Serialize for $E {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> { s.serialize_str(self.name()) }
        }
        impl<'de> serde::Deserialize<'de> for $E {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let n = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                <$E as $crate::model::named::Named>::from_name(&n)
                    .ok_or_else(|| serde::de::Error::custom(format!("unknown {} {n:?}", stringify!($E))))
            }
        }
    };
}

/// A map keyed by a named id, serialized as `{name: value}`: a vector
/// sorted by key (a frame's maps hold a handful of entries each; one
/// allocation, in the order a B-tree would give).
#[derive(Debug, Clone, PartialEq)]
pub struct NamedMap<K: Named, V>(Vec<(K, V)>);

impl<K: Named, V> Default for NamedMap<K, V> {
    fn default() -> Self {
        NamedMap(Vec::new())
    }
}

impl<K: Named, V> NamedMap<K, V> {
    fn find(&self, k: K) -> Result<usize, usize> {
        self.0.binary_search_by(|(x, _)| x.cmp(&k))
    }
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        match self.find(k) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, v)),
            Err(i) => {
                self.0.insert(i, (k, v));
                None
            }
        }
    }
    pub fn get(&self, k: K) -> Option<&V> {
        self.find(k).ok().map(|i| &self.0[i].1)
    }
    pub fn get_mut(&mut self, k: K) -> Option<&mut V> {
        self.find(k).ok().map(|i| &mut self.0[i].1)
    }
    pub fn remove(&mut self, k: K) -> Option<V> {
        self.find(k).ok().map(|i| self.0.remove(i).1)
    }
    pub fn contains(&self, k: K) -> bool {
        self.find(k).is_ok()
    }
    /// In key order.
    pub fn iter(&self) -> impl Iterator<Item = (K, &V)> {
        self.0.iter().map(|(k, v)| (*k, v))
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<K: Named, V> FromIterator<(K, V)> for NamedMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut m = NamedMap::default();
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}

impl<K: Named, V: serde::Serialize> serde::Serialize for NamedMap<K, V> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k.name(), v)?;
        }
        m.end()
    }
}

impl<'de, K: Named, V: serde::Deserialize<'de>> serde::Deserialize<'de> for NamedMap<K, V> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Vis<K, V>(std::marker::PhantomData<(K, V)>);
        impl<'de, K: Named, V: serde::Deserialize<'de>> Visitor<'de> for Vis<K, V> {
            type Value = NamedMap<K, V>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map keyed by names")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = NamedMap::default();
                while let Some(name) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match K::from_name(&name) {
                        Some(k) => {
                            out.insert(k, map.next_value()?);
                        }
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(Vis(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use crate::model::{HistKind, Histograms, Source, SourceStatus, Sources};

    /// Entries come out in key order whatever order they went in, one per
    /// key (the last value), and serialize so.
    #[test]
    fn a_named_map_keeps_key_order_and_one_entry_a_key() {
        let mut m = Sources::default();
        for s in [Source::SockDiag, Source::Procfs, Source::EbpfRunq] {
            assert!(m.insert(s, SourceStatus::ok()).is_none());
        }
        assert!(m.insert(Source::Procfs, SourceStatus::ok()).is_some());
        let keys: Vec<Source> = m.iter().map(|(k, _)| k).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        assert_eq!(keys.len(), 3);
        assert!(m.remove(Source::SockDiag).is_some() && !m.contains(Source::SockDiag));
        let mut h = Histograms::default();
        h.insert(HistKind::RunqUs, vec![(2.0, 1)]);
        h.insert(HistKind::RttUs, vec![(4.0, 3)]);
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(json, r#"{"rtt_us":[[4.0,3]],"runq_us":[[2.0,1]]}"#);
        let back: Histograms = serde_json::from_str(&json).unwrap();
        assert_eq!(back, h);
        h.get_mut(HistKind::RttUs).unwrap().push((8.0, 1));
        assert_eq!(h.get(HistKind::RttUs).map(Vec::len), Some(2));
    }
}
