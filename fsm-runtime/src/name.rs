//! Actors' names, interned: a holder and every history entry name their actor,
//! and copying a name must cost nothing on the path every action takes.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{OnceLock, PoisonError, RwLock};

/// An actor's name, as a [`Holder`](crate::Holder) and an [`Entry`](crate::Entry)
/// record it: interned, so it is copied as a pointer and compared as one (a
/// thin pointer, to the name's one `&'static str`: eight bytes in every holder
/// and entry).
///
/// Each distinct name is kept once for the rest of the process: the names of the
/// actors it makes ([`Actor::new`](crate::Actor::new)) and those it reads back
/// from a store's records and histories. Actors are the controllers, operators,
/// admins and the healer of a system, a set that does not grow with the
/// objects; do not name an actor after something that does (a request id).
///
/// ```
/// use fsm_runtime::ActorName;
///
/// let name = ActorName::new("alice");
/// assert_eq!(name, "alice");
/// assert_eq!(name, ActorName::new(String::from("alice")));
/// assert_eq!(name.len(), 5); // a `str` underneath
/// ```
#[derive(Clone, Copy)]
pub struct ActorName(&'static &'static str);

/// A name in the interner, found by its text.
#[derive(PartialEq, Eq, Hash)]
struct Interned(&'static &'static str);

impl Borrow<str> for Interned {
    fn borrow(&self) -> &str {
        self.0
    }
}

type Names = RwLock<HashSet<Interned, foldhash::fast::RandomState>>;

fn names() -> &'static Names {
    static NAMES: OnceLock<Names> = OnceLock::new();
    NAMES.get_or_init(Default::default)
}

impl ActorName {
    /// The interned name `name`: the same one every time it is asked for.
    pub fn new(name: impl AsRef<str>) -> Self {
        let name = name.as_ref();
        let known = names()
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .map(|known| known.0);
        if let Some(known) = known {
            return ActorName(known);
        }
        let mut names = names().write().unwrap_or_else(PoisonError::into_inner);
        // Another thread may have added it between the two locks.
        if let Some(known) = names.get(name) {
            return ActorName(known.0);
        }
        let text: &'static str = Box::leak(Box::<str>::from(name));
        let kept: &'static &'static str = Box::leak(Box::new(text));
        names.insert(Interned(kept));
        ActorName(kept)
    }

    /// The name's text, kept for the rest of the process.
    pub fn as_str(&self) -> &'static str {
        self.0
    }
}

/// Interned: one name, one address.
impl PartialEq for ActorName {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for ActorName {}

/// As its text, so that a name and a `str` find the same entry of a map.
impl Hash for ActorName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state)
    }
}

impl PartialOrd for ActorName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// By text.
impl Ord for ActorName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(other.0)
    }
}

impl Deref for ActorName {
    type Target = str;

    fn deref(&self) -> &str {
        self.0
    }
}

impl AsRef<str> for ActorName {
    fn as_ref(&self) -> &str {
        self.0
    }
}

impl Borrow<str> for ActorName {
    fn borrow(&self) -> &str {
        self.0
    }
}

impl PartialEq<str> for ActorName {
    fn eq(&self, other: &str) -> bool {
        *self.0 == other
    }
}

impl PartialEq<&str> for ActorName {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == *other
    }
}

impl From<&str> for ActorName {
    fn from(name: &str) -> Self {
        ActorName::new(name)
    }
}

impl From<String> for ActorName {
    fn from(name: String) -> Self {
        ActorName::new(name)
    }
}

impl fmt::Display for ActorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl fmt::Debug for ActorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0, f)
    }
}

impl serde::Serialize for ActorName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0)
    }
}

impl<'de> serde::Deserialize<'de> for ActorName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <std::borrow::Cow<'de, str>>::deserialize(deserializer).map(ActorName::new)
    }
}

#[cfg(test)]
mod tests {
    use super::ActorName;

    #[test]
    fn a_name_is_interned_once_across_threads() {
        let names: Vec<ActorName> = std::thread::scope(|s| {
            let spawned: Vec<_> = (0..4)
                .map(|_| s.spawn(|| ActorName::new(format!("ops-{}", 7))))
                .collect();
            spawned.into_iter().map(|t| t.join().unwrap()).collect()
        });
        // One address for every thread's copy: equality is a pointer comparison.
        assert!(
            names
                .iter()
                .all(|n| n.as_str().as_ptr() == names[0].as_str().as_ptr())
        );
        assert_eq!(names[0], "ops-7");
        assert_ne!(names[0], ActorName::new("ops-8"));
    }

    #[test]
    fn a_name_reads_back_from_json_as_the_same_name() {
        let name = ActorName::new("healer");
        let json = serde_json::to_string(&name).unwrap();
        assert_eq!(json, "\"healer\"");
        let back: ActorName = serde_json::from_str(&json).unwrap();
        assert_eq!(back.as_str().as_ptr(), name.as_str().as_ptr());
    }
}
