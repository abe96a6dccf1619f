//! Prompt templates: `{{name}}` placeholders filled in one pass.

/// The values a step's templates may use.
#[derive(Debug, Clone, Default)]
pub struct TemplateVars {
    pub title: String,
    pub prompt: String,
    /// The previous step's context header (or raw output when extraction failed).
    pub handoff: String,
    /// The note given with the last approve/reject/move.
    pub note: String,
    pub branch: String,
    pub status: String,
    pub context_dir: String,
    /// What failed before this step, when a failure led here: the step, its error and the
    /// tail of its log.
    pub failure: String,
    /// The session a continued step resumes (`resume_argv` only).
    pub session: String,
    /// What people said to the agent since its last step (`baton say`, answers to its
    /// questions), each with who said it.
    pub messages: String,
}

impl TemplateVars {
    fn get(&self, name: &str) -> Option<&str> {
        Some(match name {
            "title" => &self.title,
            "prompt" => &self.prompt,
            "handoff" => &self.handoff,
            "note" => &self.note,
            "branch" => &self.branch,
            "status" => &self.status,
            "context_dir" => &self.context_dir,
            "failure" => &self.failure,
            "session" => &self.session,
            "messages" => &self.messages,
            _ => return None,
        })
    }
}

/// Fills `{{name}}` (spaces inside the braces allowed) from `lookup`. Inserted values are
/// never scanned again, so task text containing `{{…}}` stays as written; an unknown
/// placeholder is left as it is, so a typo shows in the prompt instead of vanishing.
pub fn fill<'a>(template: &str, mut lookup: impl FnMut(&str) -> Option<&'a str>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                let name = after[..end].trim();
                match lookup(name) {
                    Some(v) => out.push_str(v),
                    None => out.push_str(&rest[start..start + 2 + end + 2]),
                }
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// True when `template` has the placeholder `{{name}}`.
pub fn uses(template: &str, name: &str) -> bool {
    let mut found = false;
    fill(template, |n| {
        found |= n == name;
        None
    });
    found
}

/// Renders a prompt template as [`render_prompt`] does; messages said to the agent that the
/// template has no `{{messages}}` for follow it, so a message a step takes is always sent.
pub fn render_prompt_with_messages(template: &str, vars: &TemplateVars) -> String {
    let prompt = render_prompt(template, vars);
    let messages = vars.messages.trim();
    if messages.is_empty() || uses(template, "messages") {
        return prompt;
    }
    if prompt.is_empty() {
        return messages.to_string();
    }
    format!("{prompt}\n\n{messages}")
}

/// Renders a profile's prompt template; surrounding blank space is trimmed.
pub fn render_prompt(template: &str, vars: &TemplateVars) -> String {
    fill(template, |n| vars.get(n)).trim().to_string()
}

/// Renders a command line: each element separately, `{{message}}` being the rendered
/// prompt. The prompt stays one argv element whatever it contains.
pub fn render_argv(argv: &[String], vars: &TemplateVars, message: &str) -> Vec<String> {
    argv.iter()
        .map(|a| {
            fill(a, |n| match n {
                "message" => Some(message),
                other => vars.get(other),
            })
        })
        .collect()
}

/// True when `template` uses the placeholder `{{name}}`.
pub fn uses_placeholder(template: &str, name: &str) -> bool {
    let mut found = false;
    fill(template, |n| {
        found |= n == name;
        None
    });
    found
}

/// Placeholder names used in `template` that [`render_prompt`] does not know.
pub fn unknown_placeholders(template: &str, extra: &[&str]) -> Vec<String> {
    let probe = TemplateVars::default();
    let mut unknown = Vec::new();
    fill(template, |n| {
        if probe.get(n).is_none() && !extra.contains(&n) && !unknown.iter().any(|u| u == n) {
            unknown.push(n.to_string());
        }
        None
    });
    unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> TemplateVars {
        TemplateVars {
            title: "Fix {{prompt}} bug".into(),
            prompt: "The login button is broken.".into(),
            handoff: "## Handoff from previous step (plan)".into(),
            note: String::new(),
            branch: "baton/1-fix".into(),
            status: "build".into(),
            context_dir: "/tmp/ctx".into(),
            ..Default::default()
        }
    }

    #[test]
    fn fills_every_known_placeholder() {
        let t = "# {{title}}\n{{ prompt }}\n\n{{handoff}}\n{{note}}\n{{branch}} {{status}} {{context_dir}}\n";
        assert_eq!(
            render_prompt(t, &vars()),
            "# Fix {{prompt}} bug\nThe login button is broken.\n\n## Handoff from previous step (plan)\n\nbaton/1-fix build /tmp/ctx"
        );
    }

    #[test]
    fn unknown_and_unclosed_placeholders_stay() {
        assert_eq!(
            render_prompt("{{titel}} {{title", &vars()),
            "{{titel}} {{title"
        );
        assert_eq!(
            unknown_placeholders("{{titel}} {{title}} {{message}}", &["message"]),
            ["titel"]
        );
    }

    #[test]
    fn message_is_one_argv_element() {
        let argv: Vec<String> = ["claude", "-p", "{{message}}", "--title={{title}}"]
            .map(String::from)
            .into();
        let msg = "two words; rm -rf / \"quoted\"\nnext line";
        let got = render_argv(&argv, &vars(), msg);
        assert_eq!(got.len(), 4);
        assert_eq!(got[2], msg);
        assert_eq!(got[3], "--title=Fix {{prompt}} bug");
    }

    #[test]
    fn messages_follow_a_template_without_a_place_for_them() {
        let v = TemplateVars {
            messages: "## Messages from people while you worked\n\nuser said:\n\nuse tabs".into(),
            ..vars()
        };
        let plain = render_prompt_with_messages("Do {{prompt}}", &v);
        assert_eq!(
            plain,
            "Do The login button is broken.\n\n## Messages from people while you worked\n\nuser said:\n\nuse tabs"
        );
        // A template with `{{messages}}` places them itself, once.
        let placed = render_prompt_with_messages("{{messages}}\n\nthen {{prompt}}", &v);
        assert_eq!(placed.matches("use tabs").count(), 1, "{placed}");
        assert!(placed.starts_with("## Messages"), "{placed}");
        // A continue template that renders nothing else is the messages alone.
        assert_eq!(render_prompt_with_messages("{{failure}}", &v), v.messages);
        assert_eq!(render_prompt_with_messages("Do it", &vars()), "Do it");
        assert!(uses("a {{ messages }} b", "messages"));
        assert!(!uses("a {{message}} b", "messages"));
    }
}
