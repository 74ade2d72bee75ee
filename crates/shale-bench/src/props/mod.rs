//! Properties: YCSB's configuration model.
//!
//! A run is configured by `name=value` properties read from Java-properties files (`-P file`) and
//! from the command line (`-p name=value`). Later sources override earlier ones, so
//! `-P workloads/workloada -P workloads/shale.properties -p recordcount=1000` reads the workload,
//! then the backend's file, then the override.
//!
//! Invariants:
//! - Every stored property remembers where it came from ([`Origin`]), and every error about a
//!   value names that place (`workloads/workloada:12`), so a person can fix it at once.
//! - Values are trimmed of surrounding white space (as YCSB-cpp does); keys are case-sensitive.
//! - Nothing here knows which names are valid: [`Properties::unknown`] compares the names
//!   against the [`PropSpec`] tables of the components in use and lists unknown ones with where
//!   they were set and the closest known names. The run warns about them and goes on, as
//!   YCSB-cpp ignores names no component reads; `strict=true` makes them errors.

mod parse;
mod spec;

pub use parse::parse_java_properties;
pub use spec::{closest_names, PropSpec};

use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// Where a property value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Line `line` (1-based) of a properties file.
    File { path: String, line: usize },
    /// A `-p name=value` argument.
    CommandLine,
    /// Set by the harness itself (for example `-db NAME` sets `dbname`).
    Harness,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { path, line } => write!(f, "{path}:{line}"),
            Origin::CommandLine => f.write_str("-p on the command line"),
            Origin::Harness => f.write_str("the command line"),
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    value: String,
    origin: Origin,
}

/// An ordered set of properties with typed, checked accessors.
#[derive(Debug, Clone, Default)]
pub struct Properties {
    entries: BTreeMap<String, Entry>,
}

impl Properties {
    /// An empty set.
    pub fn new() -> Properties {
        Properties::default()
    }

    /// Reads a Java-properties file; its values override those already present.
    ///
    /// # Errors
    /// `Io` when the file cannot be read, `Property` when a line is malformed.
    pub fn load_file(&mut self, path: &Path) -> Result<()> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("cannot read properties file {}", path.display()), e))?;
        let name = path.display().to_string();
        for (line, key, value) in parse_java_properties(&text, &name)? {
            self.set(
                key,
                value,
                Origin::File {
                    path: name.clone(),
                    line,
                },
            );
        }
        Ok(())
    }

    /// Applies one `name=value` command-line argument.
    ///
    /// # Errors
    /// `Usage` when there is no `=` or the name is empty.
    pub fn set_arg(&mut self, arg: &str) -> Result<()> {
        let Some((key, value)) = arg.split_once('=') else {
            return Err(Error::usage(format!(
                "-p expects name=value (for example -p operationcount=1000), got '{arg}'"
            )));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(Error::usage(format!(
                "-p '{arg}': the property name is empty"
            )));
        }
        self.set(
            key.to_string(),
            value.trim().to_string(),
            Origin::CommandLine,
        );
        Ok(())
    }

    /// Sets `key` to `value`, replacing any earlier value.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>, origin: Origin) {
        self.entries.insert(
            key.into(),
            Entry {
                value: value.into(),
                origin,
            },
        );
    }

    /// Removes `key`; returns whether it was present.
    pub fn remove(&mut self, key: &str) -> bool {
        self.entries.remove(key).is_some()
    }

    /// The raw value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(|e| e.value.as_str())
    }

    /// Where `key` was set, if it was.
    pub fn origin(&self, key: &str) -> Option<&Origin> {
        self.entries.get(key).map(|e| &e.origin)
    }

    /// Whether `key` is set.
    pub fn contains(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    /// All properties in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries
            .iter()
            .map(|(k, e)| (k.as_str(), e.value.as_str()))
    }

    /// The value of `key`, or `default` when unset.
    pub fn get_str<'a>(&'a self, key: &str, default: &'a str) -> &'a str {
        self.get(key).unwrap_or(default)
    }

    fn bad(&self, key: &str, what: impl fmt::Display) -> Error {
        let value = self.get(key).unwrap_or("");
        let place = self
            .origin(key)
            .map(|o| format!(" (set at {o})"))
            .unwrap_or_default();
        Error::property(format!(
            "bad value for property {key}: '{value}' {what}{place}"
        ))
    }

    /// An unsigned integer; accepts `_` separators (`1_000_000`).
    ///
    /// # Errors
    /// `Property` naming the key, the value and where it was set.
    pub fn get_u64(&self, key: &str, default: u64) -> Result<u64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .replace('_', "")
                .parse::<u64>()
                .map_err(|_| self.bad(key, "is not an unsigned integer")),
        }
    }

    /// A signed integer.
    ///
    /// # Errors
    /// `Property` naming the key, the value and where it was set.
    pub fn get_i64(&self, key: &str, default: i64) -> Result<i64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .replace('_', "")
                .parse::<i64>()
                .map_err(|_| self.bad(key, "is not an integer")),
        }
    }

    /// An unsigned integer that must lie in `min..=max`.
    ///
    /// # Errors
    /// `Property` when malformed or out of range.
    pub fn get_u64_in(&self, key: &str, default: u64, min: u64, max: u64) -> Result<u64> {
        let v = self.get_u64(key, default)?;
        if v < min || v > max {
            return Err(self.bad(
                key,
                format_args!("is out of range (must be between {min} and {max})"),
            ));
        }
        Ok(v)
    }

    /// A finite floating-point number.
    ///
    /// # Errors
    /// `Property` when malformed, infinite or NaN.
    pub fn get_f64(&self, key: &str, default: f64) -> Result<f64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => match v.parse::<f64>() {
                Ok(x) if x.is_finite() => Ok(x),
                _ => Err(self.bad(key, "is not a finite number")),
            },
        }
    }

    /// A finite number in `min..=max`.
    ///
    /// # Errors
    /// `Property` when malformed or out of range.
    pub fn get_f64_in(&self, key: &str, default: f64, min: f64, max: f64) -> Result<f64> {
        let v = self.get_f64(key, default)?;
        if v < min || v > max {
            return Err(self.bad(
                key,
                format_args!("is out of range (must be between {min} and {max})"),
            ));
        }
        Ok(v)
    }

    /// A boolean: `true`/`false`/`1`/`0`, any case (YCSB-cpp's rule).
    ///
    /// # Errors
    /// `Property` for anything else.
    pub fn get_bool(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "true" | "1" => Ok(true),
                "false" | "0" => Ok(false),
                _ => Err(self.bad(key, "is not a boolean (use true or false)")),
            },
        }
    }

    /// One of `choices` (exact match); returns the matching choice.
    ///
    /// # Errors
    /// `Property` listing the choices.
    pub fn get_choice(
        &self,
        key: &str,
        default: &'static str,
        choices: &[&'static str],
    ) -> Result<&'static str> {
        let v = self.get_str(key, default);
        choices
            .iter()
            .copied()
            .find(|c| *c == v)
            .ok_or_else(|| self.bad(key, format_args!("is not one of: {}", choices.join(", "))))
    }

    /// The properties whose names are in none of `tables`, in name order, each with where it was
    /// set and the closest known names.
    pub fn unknown(&self, tables: &[&[PropSpec]]) -> Vec<UnknownProperty> {
        let known: Vec<&str> = tables
            .iter()
            .flat_map(|t| t.iter().map(|s| s.name))
            .collect();
        self.entries
            .iter()
            .filter(|(key, _)| !known.contains(&key.as_str()))
            .map(|(key, entry)| UnknownProperty {
                name: key.clone(),
                origin: entry.origin.clone(),
                suggestions: closest_names(key, &known, 3)
                    .into_iter()
                    .map(str::to_string)
                    .collect(),
            })
            .collect()
    }

    /// Checks that every property name is in one of `tables`.
    ///
    /// # Errors
    /// `Property` naming the first unknown property, where it was set and what was probably meant.
    pub fn check_known(&self, tables: &[&[PropSpec]]) -> Result<()> {
        match self.unknown(tables).first() {
            None => Ok(()),
            Some(u) => Err(Error::property(format!("unknown property {u}"))),
        }
    }
}

/// A property no component knows (see [`Properties::unknown`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownProperty {
    /// Its name.
    pub name: String,
    /// Where it was set.
    pub origin: Origin,
    /// The closest known names, closest first.
    pub suggestions: Vec<String>,
}

impl fmt::Display for UnknownProperty {
    /// `'name' (set at file:line); did you mean x?`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}' (set at {})", self.name, self.origin)?;
        if self.suggestions.is_empty() {
            f.write_str(" (see `shale-bench -help-properties` for the full list)")
        } else {
            write!(f, "; did you mean {}?", self.suggestions.join(" or "))
        }
    }
}

#[cfg(test)]
mod tests;
