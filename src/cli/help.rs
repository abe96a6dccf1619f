//! `baton --help` lists the commands in groups (clap lists subcommands in one block, so the
//! root command's help template carries the grouped list, built from the commands
//! themselves). `baton help CMD` and `CMD --help` are clap's own.

use clap::Command;

/// The groups, in order; a command in none of them is listed under "Other commands", so a
/// new command is never left out of the help.
const GROUPS: &[(&str, &[&str])] = &[
    (
        "Tasks",
        &[
            "new",
            "list",
            "show",
            "start",
            "approve",
            "reject",
            "abort",
            "resume",
            "retry",
            "move",
            "break",
            "continue",
            "rerun",
            "dismiss",
            "edit",
            "archive",
            "unarchive",
            "delete",
            "logs",
            "diff",
            "shell",
            "say",
            "answer",
            "attach",
            "run",
        ],
    ),
    ("Pipelines and agents", &["pipelines", "agents", "try"]),
    (
        "Servers",
        &["engine", "engines", "serve", "mcp", "token", "forge"],
    ),
    (
        "Setup",
        &["init", "config", "db", "completions", "man", "help"],
    ),
];

/// The root command with its commands listed in groups.
pub fn grouped(cmd: Command) -> Command {
    let mut built = cmd.clone();
    built.build();
    let commands: Vec<(String, String)> = built
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| {
            let about = c.get_about().map(|a| a.to_string()).unwrap_or_default();
            (c.get_name().to_string(), about)
        })
        .collect();
    let width = commands.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let mut text = String::new();
    let mut section = |heading: &str, names: Vec<&(String, String)>| {
        if names.is_empty() {
            return;
        }
        text.push_str(&format!("{heading}:\n"));
        for (name, about) in names {
            let about = about.lines().next().unwrap_or("");
            text.push_str(&format!("  {name:<width$}  {about}\n"));
        }
        text.push('\n');
    };
    for (heading, names) in GROUPS {
        let listed = names
            .iter()
            .filter_map(|n| commands.iter().find(|(c, _)| c == n))
            .collect();
        section(heading, listed);
    }
    let others = commands
        .iter()
        .filter(|(c, _)| !GROUPS.iter().any(|(_, names)| names.contains(&c.as_str())))
        .collect();
    section("Other commands", others);
    let template = format!(
        "{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{text}Options:\n{{options}}{{after-help}}"
    );
    cmd.help_template(template)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_command_is_in_one_group() {
        let mut cmd = super::super::Cli::command();
        cmd.build();
        for c in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
            let n = GROUPS
                .iter()
                .filter(|(_, names)| names.contains(&c.get_name()))
                .count();
            assert_eq!(n, 1, "`{}` is in {n} groups", c.get_name());
        }
    }
}
