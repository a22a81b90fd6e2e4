//! Small typed ids with stable names (sources, histogram kinds, statuses)
//! and a map keyed by them that reads leniently: an id this kitty does not
//! know (written by a newer one) is skipped, not an error.

use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use std::collections::BTreeMap;

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

/// A map keyed by a named id, serialized as `{name: value}`.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedMap<K: Named, V>(BTreeMap<K, V>);

impl<K: Named, V> Default for NamedMap<K, V> {
    fn default() -> Self {
        NamedMap(BTreeMap::new())
    }
}

impl<K: Named, V> NamedMap<K, V> {
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        self.0.insert(k, v)
    }
    pub fn get(&self, k: K) -> Option<&V> {
        self.0.get(&k)
    }
    pub fn get_mut(&mut self, k: K) -> Option<&mut V> {
        self.0.get_mut(&k)
    }
    pub fn remove(&mut self, k: K) -> Option<V> {
        self.0.remove(&k)
    }
    pub fn contains(&self, k: K) -> bool {
        self.0.contains_key(&k)
    }
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
        NamedMap(iter.into_iter().collect())
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
                let mut out = BTreeMap::new();
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
                Ok(NamedMap(out))
            }
        }
        d.deserialize_map(Vis(std::marker::PhantomData))
    }
}
