//! Coercion of values written by a language model: numbers as strings (`"12"`), booleans as
//! strings (`"false"`), NaN/infinities, and coordinates far outside any canvas.
//!
//! Owns only value-level rules; which fields are coerced is the actions' business.

use serde_json::{Map, Value};

use super::CanvasError;

/// Largest absolute coordinate or size accepted, in px. Anything beyond is clamped: a canvas
/// this large is already unusable, and it keeps every later computation finite.
pub const COORD_LIMIT: f64 = 1.0e7;

/// A finite number from a JSON number or a numeric string (`" 12.5 "`, `"12px"`); `None` for
/// anything else, including `"NaN"` and `"inf"`.
pub fn coerce_number(v: &Value) -> Option<f64> {
    let n = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => {
            let t = s.trim();
            let t = t.strip_suffix("px").unwrap_or(t).trim();
            t.parse::<f64>().ok()?
        }
        _ => return None,
    };
    n.is_finite().then_some(n)
}

/// A boolean from `true`/`false`, `"true"`/`"false"`/`"yes"`/`"no"`, or `0`/`1`.
pub fn coerce_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "1" => Some(true),
            "false" | "no" | "0" => Some(false),
            _ => None,
        },
        Value::Number(n) => match n.as_f64() {
            Some(0.0) => Some(false),
            Some(1.0) => Some(true),
            _ => None,
        },
        _ => None,
    }
}

/// A string from a string or a number (models write `"text": 42`).
pub fn coerce_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Clamps to ±[`COORD_LIMIT`].
pub fn clamp_coord(n: f64) -> f64 {
    n.clamp(-COORD_LIMIT, COORD_LIMIT)
}

/// Coerces `obj[field]` in place to a clamped JSON number. `Ok(None)` if the field is absent
/// or null; an error if it is present but not a finite number.
pub fn number_field(obj: &mut Map<String, Value>, field: &str) -> Result<Option<f64>, CanvasError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            let n = coerce_number(v)
                .map(clamp_coord)
                .ok_or_else(|| CanvasError::NotFinite {
                    field: field.into(),
                })?;
            obj.insert(field.into(), number_value(n));
            Ok(Some(n))
        }
    }
}

/// Coerces `obj[field]` in place to a JSON boolean; `Ok(None)` if absent.
pub fn bool_field(obj: &mut Map<String, Value>, field: &str) -> Result<Option<bool>, CanvasError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            let b = coerce_bool(v).ok_or_else(|| CanvasError::InvalidField {
                field: field.into(),
            })?;
            obj.insert(field.into(), Value::Bool(b));
            Ok(Some(b))
        }
    }
}

/// Coerces `obj[field]` in place to a JSON string; `Ok(None)` if absent.
pub fn string_field(
    obj: &mut Map<String, Value>,
    field: &str,
) -> Result<Option<String>, CanvasError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            let s = coerce_string(v).ok_or_else(|| CanvasError::InvalidField {
                field: field.into(),
            })?;
            obj.insert(field.into(), Value::String(s.clone()));
            Ok(Some(s))
        }
    }
}

/// A JSON number for a finite `f64` (0 for the impossible non-finite case).
pub fn number_value(n: f64) -> Value {
    serde_json::Number::from_f64(n).map_or(Value::from(0), Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_from_strings_and_garbage() {
        assert_eq!(coerce_number(&json!("12")), Some(12.0));
        assert_eq!(coerce_number(&json!(" 7.5px ")), Some(7.5));
        assert_eq!(coerce_number(&json!("NaN")), None);
        assert_eq!(coerce_number(&json!("inf")), None);
        assert_eq!(coerce_number(&json!("-Infinity")), None);
        assert_eq!(coerce_number(&json!(true)), None);
        assert_eq!(coerce_number(&json!(1e308)), Some(1e308));
        assert_eq!(clamp_coord(1e308), COORD_LIMIT);
    }

    #[test]
    fn bools_from_strings() {
        assert_eq!(coerce_bool(&json!("false")), Some(false));
        assert_eq!(coerce_bool(&json!("TRUE")), Some(true));
        assert_eq!(coerce_bool(&json!(0)), Some(false));
        assert_eq!(coerce_bool(&json!("maybe")), None);
    }

    #[test]
    fn fields_are_rewritten_in_place() {
        let mut obj = json!({"x": "12", "y": "oops", "closed": "false", "huge": 1e300});
        let Some(obj) = obj.as_object_mut() else {
            panic!("object")
        };
        assert_eq!(number_field(obj, "x"), Ok(Some(12.0)));
        assert_eq!(obj["x"], json!(12.0));
        assert!(number_field(obj, "y").is_err());
        assert_eq!(number_field(obj, "missing"), Ok(None));
        assert_eq!(bool_field(obj, "closed"), Ok(Some(false)));
        assert_eq!(number_field(obj, "huge"), Ok(Some(COORD_LIMIT)));
    }
}
