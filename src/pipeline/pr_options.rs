//! The `pr` hook's options, as a pipeline file writes them: checked when the pipeline is
//! read, used when the hook opens the pull request.

use serde_json::Value;

/// `{"draft": true, "base": "main", "labels": [...], "reviewers": [...]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrOptions {
    /// Open it as a draft.
    pub draft: bool,
    /// The branch it goes into (default: the task's base branch).
    pub base: Option<String>,
    /// Labels to add.
    pub labels: Vec<String>,
    /// User names asked to review.
    pub reviewers: Vec<String>,
}

impl PrOptions {
    /// Reads the hook's value; a sentence saying what is wrong otherwise.
    pub fn parse(v: &Value) -> Result<Self, String> {
        let obj = match v {
            Value::Null => return Ok(Self::default()),
            Value::Object(o) => o,
            other => {
                return Err(format!(
                    "takes an object like {{\"draft\": true}}, not {other}"
                ));
            }
        };
        let mut out = Self::default();
        for (k, v) in obj {
            match k.as_str() {
                "draft" => {
                    out.draft = v
                        .as_bool()
                        .ok_or_else(|| format!("`draft` takes true or false, not {v}"))?;
                }
                "base" => {
                    out.base = Some(
                        v.as_str()
                            .filter(|s| !s.trim().is_empty())
                            .ok_or_else(|| format!("`base` takes a branch name, not {v}"))?
                            .to_string(),
                    );
                }
                "labels" | "reviewers" => {
                    let list = v
                        .as_array()
                        .and_then(|l| {
                            l.iter()
                                .map(|x| x.as_str().map(String::from))
                                .collect::<Option<Vec<_>>>()
                        })
                        .ok_or_else(|| format!("`{k}` takes a list of names, not {v}"))?;
                    if k == "labels" {
                        out.labels = list;
                    } else {
                        out.reviewers = list;
                    }
                }
                other if other.starts_with('_') || other.starts_with('$') => {}
                other => {
                    return Err(format!(
                        "unknown option `{other}` (expected draft, base, labels or reviewers)"
                    ));
                }
            }
        }
        Ok(out)
    }
}
