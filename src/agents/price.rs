//! What an agent's tokens cost: prices per million input and output tokens, from the
//! profile's `price_input` and `price_output`, applied to the usage a backend reports.

use serde::Serialize;
use serde_json::Value;

/// US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Price {
    pub input: f64,
    pub output: f64,
}

impl Price {
    /// The cost of `usage` (`input_tokens`, `output_tokens`), or None when it names
    /// neither count.
    pub fn cost(&self, usage: &Value) -> Option<f64> {
        let input = usage.get("input_tokens").and_then(Value::as_f64);
        let output = usage.get("output_tokens").and_then(Value::as_f64);
        if input.is_none() && output.is_none() {
            return None;
        }
        let per = |n: Option<f64>, price: f64| n.unwrap_or(0.0) * price / 1_000_000.0;
        Some(per(input, self.input) + per(output, self.output))
    }
}

/// Reads `price_input` / `price_output` from a profile object: both or neither, each a
/// number ≥ 0. Err is the sentence to report.
pub fn parse(obj: &serde_json::Map<String, Value>) -> Result<Option<Price>, String> {
    let read = |key: &str| match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(n) if n >= 0.0 && n.is_finite() => Ok(Some(n)),
            _ => Err(format!(
                "`{key}` must be a number of US dollars per million tokens, like 3.0"
            )),
        },
    };
    match (read("price_input")?, read("price_output")?) {
        (Some(input), Some(output)) => Ok(Some(Price { input, output })),
        (None, None) => Ok(None),
        _ => Err(
            "give both `price_input` and `price_output` (dollars per million tokens), or neither"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prices_apply_to_the_usage_and_are_read_in_pairs() {
        let p = Price {
            input: 3.0,
            output: 15.0,
        };
        let usage = json!({"input_tokens": 1_000_000, "output_tokens": 200_000});
        assert_eq!(p.cost(&usage), Some(6.0));
        assert_eq!(p.cost(&json!({"output_tokens": 1000})), Some(0.015));
        assert_eq!(p.cost(&json!({"total": 5})), None);

        let obj = |v: Value| v.as_object().cloned().unwrap();
        assert_eq!(
            parse(&obj(json!({"price_input": 1, "price_output": 2.5}))),
            Ok(Some(Price {
                input: 1.0,
                output: 2.5
            }))
        );
        assert_eq!(parse(&obj(json!({}))), Ok(None));
        assert!(
            parse(&obj(json!({"price_input": 1})))
                .unwrap_err()
                .contains("both")
        );
        assert!(parse(&obj(json!({"price_input": -1, "price_output": 1}))).is_err());
        assert!(parse(&obj(json!({"price_input": "3", "price_output": 1}))).is_err());
    }
}
