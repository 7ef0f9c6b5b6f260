//! The one way boxlayer's configs are changed in part: a partial TOML table is laid over a base,
//! key by key (tables merge recursively, any other value replaces). A pipeline file over the file
//! it `extends`, a class table over that class's own defaults, a platform's table over the
//! resolved config: all go through [`overlay`], so every override keeps the defaults it does not
//! name and unknown keys are still refused by the target type.

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize};

/// Lays `over` onto `base`: tables merge key by key (recursively), any other value replaces.
pub fn overlay(base: &mut toml::Value, over: toml::Value) {
    match (base, over) {
        (toml::Value::Table(b), toml::Value::Table(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(existing) => overlay(existing, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

/// `base` with `over` laid on it, read back as `T` (so `T`'s own checks, such as
/// `deny_unknown_fields`, apply to the result).
pub fn overlaid<T: Serialize + DeserializeOwned>(base: &T, over: toml::Value) -> Result<T, String> {
    let mut value = toml::Value::try_from(base).map_err(|e| e.to_string())?;
    overlay(&mut value, over);
    value.try_into().map_err(|e: toml::de::Error| e.to_string())
}

/// For `#[serde(deserialize_with)]`: reads a partial table as changes to `base`.
pub fn deserialize_over<'de, T, D>(base: T, deserializer: D) -> Result<T, D::Error>
where
    T: Serialize + DeserializeOwned,
    D: Deserializer<'de>,
{
    let over = toml::Value::deserialize(deserializer)?;
    overlaid(&base, over).map_err(D::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        a: f64,
        b: Option<String>,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        x: u32,
        inner: Inner,
    }

    #[test]
    fn tables_merge_key_by_key_and_values_replace() {
        let mut base: toml::Value = toml::from_str("a = 1\n[t]\nx = 1\ny = 2\n[t.u]\nz = 3\n").unwrap();
        let over: toml::Value = toml::from_str("b = 2\n[t]\ny = 5\n[t.u]\nw = 4\n").unwrap();
        overlay(&mut base, over);
        let expected: toml::Value = toml::from_str("a = 1\nb = 2\n[t]\nx = 1\ny = 5\n[t.u]\nz = 3\nw = 4\n").unwrap();
        assert_eq!(base, expected);
    }

    #[test]
    fn an_override_keeps_what_it_does_not_name_and_refuses_unknown_keys() {
        let base = Outer {
            x: 1,
            inner: Inner {
                a: 0.5,
                b: Some("keep".into()),
            },
        };
        let changed = overlaid(&base, toml::from_str("[inner]\na = 2.0\n").unwrap()).unwrap();
        assert_eq!(
            changed.inner,
            Inner {
                a: 2.0,
                b: Some("keep".into())
            }
        );
        assert_eq!(changed.x, 1);
        let e = overlaid(&base, toml::from_str("[inner]\nc = 2.0\n").unwrap()).unwrap_err();
        assert!(e.contains("unknown field `c`"), "{e}");
    }
}
