//! Sizes in config.toml: a number of bytes (`1048576`) or a number with a unit (`"100MiB"`,
//! `"512KiB"`, `"2GB"`; `K`/`M`/`G` mean KiB/MiB/GiB).

use serde::{Deserialize, Deserializer, de};

/// Parses `"100MiB"`, `"64 KiB"`, `"5MB"`, `"1G"` or `"4096"` into bytes.
pub fn parse(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let bad = || {
        format!(
            "`{text}` is not a size — write a number of bytes or one like \"100MiB\", \"512KiB\", \"1GiB\""
        )
    };
    let number: u64 = number.parse().map_err(|_| bad())?;
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return Err(bad()),
    };
    number.checked_mul(factor).ok_or_else(bad)
}

/// A size for people: `100 MiB`, `64 KiB`, `10 B`.
pub fn show(bytes: u64) -> String {
    for (unit, factor) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes >= factor && bytes.is_multiple_of(factor) {
            return format!("{} {unit}", bytes / factor);
        }
    }
    format!("{bytes} B")
}

/// Deserializes a size written as a number or a string with a unit.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Bytes(u64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Bytes(n) => Ok(n),
        Raw::Text(t) => parse(&t).map_err(de::Error::custom),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_and_without_units() {
        let cases = [
            ("4096", Some(4096)),
            ("100MiB", Some(100 << 20)),
            ("64 KiB", Some(64 << 10)),
            ("1G", Some(1 << 30)),
            ("5MB", Some(5_000_000)),
            ("10 B", Some(10)),
            ("", None),
            ("MiB", None),
            ("1.5MiB", None),
            ("12 parsecs", None),
            ("99999999999999999999GiB", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).ok(), want, "{text:?}");
        }
        assert_eq!(show(100 << 20), "100 MiB");
        assert_eq!(show(1500), "1500 B");
    }
}
